package otelstore

import (
	"context"
	"errors"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrcache"
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

// classifier turns an error into a bounded, valid error.type value.
type classifier struct {
	custom func(error) string
	values *attrcache.Cache[string] // custom result -> recorded value
}

func newClassifier(custom func(error) string) classifier {
	identity := func(recorded string) string { return recorded }
	return classifier{custom: custom, values: attrcache.New(errorTypeLimit, catalog.OtherError, catalog.OtherError, identity)}
}

// errorType classifies err. An error whose methods panic on the way (the
// Unwrap of a typed nil *fs.PathError, which errors.Is walks) is _OTHER,
// never a panic out of the decorator.
func (c classifier) errorType(err error) (errorType string) {
	defer func() {
		if recover() != nil {
			errorType = catalog.OtherError
		}
	}()
	if c.custom != nil {
		if v := c.custom(err); v != "" {
			return c.values.Get(v)
		}
	}
	for _, class := range errorClasses {
		if errors.Is(err, class.target) {
			return class.name
		}
	}
	return catalog.OtherError
}
