package otelstore

import (
	"context"
	"errors"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/cardinality"
	"github.com/aionotel/aionotel/internal/catalog"
)

// errorTypeLimit bounds the distinct error.type values a custom classifier can
// put on the duration metric.
const errorTypeLimit = 64

// errorClasses is the default classification, most specific first.
var errorClasses = []struct {
	target error
	name   string
}{
	{eventstore.ErrSequenceConflict, "sequence_conflict"},
	{eventstore.ErrInvalidToken, "invalid_token"},
	{eventstore.ErrNotFound, "not_found"},
	{eventstore.ErrNotOwner, "not_owner"},
	{eventstore.ErrInvalidArgument, "invalid_argument"},
	{eventstore.ErrUnsupported, "unsupported"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

// classifier turns an error into a bounded error.type value.
type classifier struct {
	custom func(error) string
	limit  *cardinality.Limiter
}

func newClassifier(custom func(error) string) classifier {
	return classifier{custom: custom, limit: cardinality.New(errorTypeLimit, catalog.OtherError)}
}

func (c classifier) errorType(err error) string {
	if c.custom != nil {
		if v := c.custom(err); v != "" {
			return c.limit.Admit(v)
		}
	}
	for _, class := range errorClasses {
		if errors.Is(err, class.target) {
			return class.name
		}
	}
	return catalog.OtherError
}
