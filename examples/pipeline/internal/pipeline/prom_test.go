package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// sample is one element of an instant-query result, its labels as strings.
type sample struct {
	Labels map[string]string
	Value  float64
}

// newPromAPI returns the client_golang HTTP API client of the Prometheus
// server listening on addr (host:port).
func newPromAPI(addr string) (promv1.API, error) {
	c, err := promapi.NewClient(promapi.Config{Address: "http://" + addr})
	if err != nil {
		return nil, err
	}
	return promv1.NewAPI(c), nil
}

// instant evaluates expr now. A scalar comes back as one sample without
// labels, a vector as one sample per series; any other type is an error.
func instant(ctx context.Context, api promv1.API, expr string) ([]sample, error) {
	v, _, _, err := api.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case *model.Scalar:
		return []sample{{Labels: map[string]string{}, Value: float64(v.Value)}}, nil
	case model.Vector:
		out := make([]sample, 0, len(v))
		for _, s := range v {
			labels := make(map[string]string, len(s.Metric))
			for k, val := range s.Metric {
				labels[string(k)] = string(val)
			}
			out = append(out, sample{Labels: labels, Value: float64(s.Value)})
		}
		return out, nil
	default:
		return nil, fmt.Errorf("query %q: unexpected result type %s", expr, v.Type())
	}
}

// badQuery reports whether err is Prometheus refusing the query itself
// (bad_data: a syntax or type error), which retrying cannot fix.
func badQuery(err error) bool {
	var apiErr *promv1.Error
	return errors.As(err, &apiErr) && apiErr.Type == promv1.ErrBadData
}
