package telemetry

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestResource checks the resource's service attributes: the defaults, a
// fresh instance ID per start, and the standard variables overriding them.
func TestResource(t *testing.T) {
	testCases := []struct {
		name, serviceName, resourceAttrs string
		wantName, wantInstance           string // "" for wantInstance: a fresh UUID
	}{
		{name: "defaults", wantName: "aionotel-demo"},
		{name: "OTEL_SERVICE_NAME", serviceName: "shop", wantName: "shop"},
		{name: "OTEL_RESOURCE_ATTRIBUTES", resourceAttrs: "service.instance.id=node-7", wantName: "aionotel-demo", wantInstance: "node-7"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_METRICS_EXPORTER", "none")
			t.Setenv("OTEL_TRACES_EXPORTER", "none")
			t.Setenv("OTEL_SERVICE_NAME", tc.serviceName)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", tc.resourceAttrs)
			ids := map[string]bool{}
			for range 2 {
				tel, err := Start(context.Background(), "aionotel-demo")
				if err != nil {
					t.Fatal(err)
				}
				defer tel.Shutdown(context.Background())
				get := func(k string) string {
					v, _ := tel.Resource.Set().Value(attribute.Key(k))
					return v.AsString()
				}
				if got := get("service.name"); got != tc.wantName {
					t.Errorf("service.name %q, want %q", got, tc.wantName)
				}
				if get("service.version") == "" || get("telemetry.sdk.name") == "" || get("host.name") == "" {
					t.Errorf("resource lacks version, SDK or host attributes: %v", tel.Resource)
				}
				id := get("service.instance.id")
				if tc.wantInstance != "" && id != tc.wantInstance {
					t.Errorf("service.instance.id %q, want %q", id, tc.wantInstance)
				}
				if tc.wantInstance == "" {
					if _, err := uuid.Parse(id); err != nil {
						t.Errorf("service.instance.id %q is not a UUID", id)
					}
				}
				ids[id] = true
			}
			if tc.wantInstance == "" && len(ids) != 2 {
				t.Errorf("two starts gave the instance IDs %v, want two fresh ones", ids)
			}
		})
	}
}

// TestSpansOffWithAlwaysOff checks that the instrumentation gets a no-op
// tracer provider exactly when OTEL_TRACES_SAMPLER=always_off, and the SDK's
// otherwise.
func TestSpansOffWithAlwaysOff(t *testing.T) {
	for _, sampler := range []string{"", "always_on", "parentbased_always_off", "always_off"} {
		t.Run(sampler, func(t *testing.T) {
			t.Setenv("OTEL_METRICS_EXPORTER", "none")
			t.Setenv("OTEL_TRACES_EXPORTER", "none")
			t.Setenv("OTEL_LOGS_EXPORTER", "none")
			t.Setenv("OTEL_TRACES_SAMPLER", sampler)
			tel, err := Start(context.Background(), "aionotel-demo")
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			_, noop := tel.Spans.(tracenoop.TracerProvider)
			if want := sampler == "always_off"; noop != want {
				t.Errorf("Spans is %T, want a no-op provider: %v", tel.Spans, want)
			}
			if !noop && tel.Spans != trace.TracerProvider(tel.Tracer) {
				t.Errorf("Spans is %T, not the SDK provider Tracer", tel.Spans)
			}
		})
	}
}
