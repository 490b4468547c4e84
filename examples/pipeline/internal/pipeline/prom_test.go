package pipeline

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// fakeProm answers /api/v1 requests with canned bodies, keyed by path, and
// records the last request's query parameters.
func fakeProm(t *testing.T, answers map[string]struct {
	status int
	body   string
}) (promClient, *http.Request) {
	t.Helper()
	last := new(http.Request)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*last = *r.Clone(context.Background())
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return promClient{base: srv.URL, hc: srv.Client()}, last
}

func TestPromQuery(t *testing.T) {
	type answer = struct {
		status int
		body   string
	}
	testCases := []struct {
		name    string
		body    answer
		want    []sample
		wantErr bool
		apiErr  bool
	}{
		{
			name: "vector with NaN",
			body: answer{200, `{"status":"success","data":{"resultType":"vector","result":[
				{"metric":{"op":"append"},"value":[1700000000.5,"0.25"]},
				{"metric":{"op":"query"},"value":[1700000000.5,"NaN"]}]}}`},
			want: []sample{{Labels: map[string]string{"op": "append"}, Value: 0.25}, {Labels: map[string]string{"op": "query"}, Value: math.NaN()}},
		},
		{
			name: "empty vector",
			body: answer{200, `{"status":"success","data":{"resultType":"vector","result":[]}}`},
			want: []sample{},
		},
		{
			name: "scalar",
			body: answer{200, `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"+Inf"]}}`},
			want: []sample{{Labels: map[string]string{}, Value: math.Inf(1)}},
		},
		{
			name:    "bad query",
			body:    answer{400, `{"status":"error","errorType":"bad_data","error":"parse error"}`},
			wantErr: true, apiErr: true,
		},
		{
			name:    "not JSON",
			body:    answer{502, `<html>bad gateway</html>`},
			wantErr: true,
		},
		{
			name:    "value not a number",
			body:    answer{200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}`},
			wantErr: true,
		},
		{
			name:    "string result",
			body:    answer{200, `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`},
			wantErr: true,
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			c, last := fakeProm(t, map[string]answer{"/api/v1/query": tc.body})
			got, err := c.query(context.Background(), `sum(rate(x[1m]))`)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("query = %v, want an error", got)
				}
				var apiErr *promAPIError
				if errors.As(err, &apiErr) != tc.apiErr {
					t.Fatalf("error %v: is *promAPIError = %v, want %v", err, !tc.apiErr, tc.apiErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q := last.URL.Query().Get("query"); q != `sum(rate(x[1m]))` {
				t.Errorf("sent query %q", q)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d samples, want %d", len(got), len(tc.want))
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				same := g.Value == w.Value || (math.IsNaN(g.Value) && math.IsNaN(w.Value))
				if !same || len(g.Labels) != len(w.Labels) {
					t.Errorf("sample %d = %+v, want %+v", i, g, w)
				}
				for k, v := range w.Labels {
					if g.Labels[k] != v {
						t.Errorf("sample %d label %s = %q, want %q", i, k, g.Labels[k], v)
					}
				}
			}
		})
	}
}

func TestPromQueryRange(t *testing.T) {
	type answer = struct {
		status int
		body   string
	}
	c, last := fakeProm(t, map[string]answer{"/api/v1/query_range": {200, `{"status":"success","data":{"resultType":"matrix","result":[
		{"metric":{"type":"charge"},"values":[[1700000000,"1"],[1700000001.5,"2.5"]]}]}}`}})
	start := time.Unix(1700000000, 0)
	got, err := c.queryRange(context.Background(), "x", start, start.Add(time.Minute), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	q := last.URL.Query()
	if q.Get("start") != "1700000000.000" || q.Get("end") != "1700000060.000" || q.Get("step") != "0.5" {
		t.Errorf("sent start=%s end=%s step=%s", q.Get("start"), q.Get("end"), q.Get("step"))
	}
	if len(got) != 1 || got[0].Labels["type"] != "charge" || len(got[0].Points) != 2 {
		t.Fatalf("got %+v", got)
	}
	p := got[0].Points[1]
	if !p.T.Equal(time.UnixMilli(1700000001500)) || p.V != 2.5 {
		t.Errorf("second point = %+v", p)
	}
}

func TestPromLabelValuesAndRules(t *testing.T) {
	type answer = struct {
		status int
		body   string
	}
	c, last := fakeProm(t, map[string]answer{
		"/api/v1/label/aion_namespace/values": {200, `{"status":"success","data":["default","tenant-a"]}`},
		"/api/v1/rules": {200, `{"status":"success","data":{"groups":[{"name":"g","file":"f.yml","rules":[
			{"name":"A","type":"alerting","health":"ok","lastError":""}]}]}}`},
	})
	values, err := c.labelValues(context.Background(), "aion_namespace", "up")
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != 2 || values[1] != "tenant-a" {
		t.Errorf("values = %v", values)
	}
	if m := last.URL.Query()["match[]"]; len(m) != 1 || m[0] != "up" {
		t.Errorf("sent match[] = %v", m)
	}
	groups, err := c.ruleGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || len(groups[0].Rules) != 1 || groups[0].Rules[0].Health != "ok" {
		t.Errorf("groups = %+v", groups)
	}
}
