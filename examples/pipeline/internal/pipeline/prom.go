package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// promClient queries a Prometheus server's HTTP API (/api/v1).
type promClient struct {
	base string // e.g. "http://127.0.0.1:9090"
	hc   *http.Client
}

// promAPIError is an error the Prometheus API answered with (a bad query, for
// example): retrying the same request will not help.
type promAPIError struct {
	Status    int    // HTTP status
	ErrorType string // Prometheus' errorType, e.g. "bad_data"
	Message   string
}

func (e *promAPIError) Error() string {
	return fmt.Sprintf("prometheus API: HTTP %d %s: %s", e.Status, e.ErrorType, e.Message)
}

// sample is one element of an instant-query result.
type sample struct {
	Labels map[string]string
	Value  float64
}

// series is one element of a range-query result.
type series struct {
	Labels map[string]string
	Points []point
}

// point is a timestamped value of a range-query series.
type point struct {
	T time.Time
	V float64
}

// apiResponse is the envelope of every /api/v1 answer.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// get performs a GET of path with params and decodes the data field into out.
func (c promClient) get(ctx context.Context, path string, params url.Values, out any) error {
	u := c.base + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	hc := c.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("prometheus API %s: HTTP %d, undecodable answer: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return &promAPIError{Status: resp.StatusCode, ErrorType: r.ErrorType, Message: r.Error}
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		return fmt.Errorf("prometheus API %s: decode data: %w", path, err)
	}
	return nil
}

// query evaluates expr at the current time. A scalar result comes back as one
// sample without labels; a vector as one sample per series.
func (c promClient) query(ctx context.Context, expr string) ([]sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := c.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, fmt.Errorf("decode scalar: %w", err)
		}
		f, err := parseValue(v)
		if err != nil {
			return nil, err
		}
		return []sample{{Labels: map[string]string{}, Value: f}}, nil
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &vec); err != nil {
			return nil, fmt.Errorf("decode vector: %w", err)
		}
		out := make([]sample, 0, len(vec))
		for _, s := range vec {
			f, err := parseValue(s.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, sample{Labels: s.Metric, Value: f})
		}
		return out, nil
	default:
		return nil, fmt.Errorf("query %q: unexpected result type %q", expr, data.ResultType)
	}
}

// queryRange evaluates expr over [start, end] every step.
func (c promClient) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]series, error) {
	params := url.Values{
		"query": {expr},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1e3, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1e3, 'f', 3, 64)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	if err := c.get(ctx, "/api/v1/query_range", params, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "matrix" {
		return nil, fmt.Errorf("query_range %q: unexpected result type %q", expr, data.ResultType)
	}
	out := make([]series, 0, len(data.Result))
	for _, r := range data.Result {
		s := series{Labels: r.Metric, Points: make([]point, 0, len(r.Values))}
		for _, v := range r.Values {
			ts, ok := v[0].(float64)
			if !ok {
				return nil, fmt.Errorf("query_range %q: timestamp %v is not a number", expr, v[0])
			}
			f, err := parseValue(v)
			if err != nil {
				return nil, err
			}
			s.Points = append(s.Points, point{T: time.UnixMilli(int64(math.Round(ts * 1e3))), V: f})
		}
		out = append(out, s)
	}
	return out, nil
}

// labelValues returns the values of label on the series matching match (a
// series selector), as Grafana's label_values(match, label) does.
func (c promClient) labelValues(ctx context.Context, label, match string) ([]string, error) {
	var values []string
	err := c.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", url.Values{"match[]": {match}}, &values)
	return values, err
}

// ruleGroups returns the rule groups Prometheus loaded, with each rule's
// evaluation health.
func (c promClient) ruleGroups(ctx context.Context) ([]ruleGroup, error) {
	var data struct {
		Groups []ruleGroup `json:"groups"`
	}
	err := c.get(ctx, "/api/v1/rules", nil, &data)
	return data.Groups, err
}

// ruleGroup is a group of /api/v1/rules.
type ruleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []struct {
		Name      string `json:"name"`
		Type      string `json:"type"` // "alerting" or "recording"
		Health    string `json:"health"`
		LastError string `json:"lastError"`
	} `json:"rules"`
}

// parseValue decodes the [timestamp, "value"] pair of the API; the value is a
// string so that NaN and ±Inf survive JSON.
func parseValue(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v[1])
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", s, err)
	}
	return f, nil
}
