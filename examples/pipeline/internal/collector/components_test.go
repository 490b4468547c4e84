package collector_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configtelemetry"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/aionotel/aionotel/examples/pipeline/internal/collector"
)

// configPath is the repository's collector-config.yaml, two levels up from
// this package's directory (examples/pipeline/internal/collector).
var configPath = filepath.Join("..", "..", "..", "..", "collector-config.yaml")

func TestComponents(t *testing.T) {
	f, err := collector.Components()
	if err != nil {
		t.Fatalf("Components: %v", err)
	}
	want := map[string]map[component.Type]bool{
		"receivers":  {component.MustNewType("otlp"): true},
		"processors": {component.MustNewType("memory_limiter"): true},
		// otlp is the deprecated alias of otlp_grpc since v0.165.
		"exporters": {component.MustNewType("debug"): true, component.MustNewType("otlp_grpc"): true,
			component.MustNewType("otlp"): true, component.MustNewType("prometheus"): true},
		"extensions": {component.MustNewType("health_check"): true},
	}
	got := map[string]map[component.Type]bool{"receivers": {}, "processors": {}, "exporters": {}, "extensions": {}}
	for typ := range f.Receivers {
		got["receivers"][typ] = true
	}
	for typ := range f.Processors {
		got["processors"][typ] = true
	}
	for typ := range f.Exporters {
		got["exporters"][typ] = true
	}
	for typ := range f.Extensions {
		got["extensions"][typ] = true
	}
	for kind, types := range want {
		for typ := range types {
			if !got[kind][typ] {
				t.Errorf("%s: %s missing (have %v)", kind, typ, got[kind])
			}
		}
		if len(got[kind]) != len(types) {
			t.Errorf("%s: got %v, want exactly %v", kind, got[kind], types)
		}
	}
	if len(f.Connectors) != 0 {
		t.Errorf("unexpected connectors %v", f.Connectors)
	}
	if f.Telemetry == nil {
		t.Fatal("Telemetry factory is nil: the service section would not load")
	}
}

// TestValidateCommand runs `otelcol-aionotel validate --config
// collector-config.yaml` in process: the same command line the end-to-end
// test runs on the built binary, without the build.
func TestValidateCommand(t *testing.T) {
	testCases := []struct {
		name    string
		env     map[string]string
		wantErr string // substring; empty means success
	}{
		{name: "defaults"},
		{
			name: "every endpoint overridden",
			env: map[string]string{
				"AIONOTEL_OTLP_GRPC_ENDPOINT":     "127.0.0.1:14317",
				"AIONOTEL_OTLP_HTTP_ENDPOINT":     "127.0.0.1:14318",
				"AIONOTEL_PROMETHEUS_ENDPOINT":    "127.0.0.1:18889",
				"AIONOTEL_HEALTH_CHECK_ENDPOINT":  "127.0.0.1:23133",
				"AIONOTEL_COLLECTOR_METRICS_HOST": "127.0.0.1",
				"AIONOTEL_COLLECTOR_METRICS_PORT": "18888",
				"AIONOTEL_JAEGER_ENDPOINT":        "127.0.0.1:24317",
				"AIONOTEL_JAEGER_INSECURE":        "false",
			},
		},
		{
			name:    "bad debug verbosity",
			env:     map[string]string{"AIONOTEL_DEBUG_VERBOSITY": "chatty"},
			wantErr: "verbosity",
		},
		{
			name:    "Jaeger TLS switch that is not a boolean",
			env:     map[string]string{"AIONOTEL_JAEGER_INSECURE": "maybe"},
			wantErr: "insecure",
		},
		{
			name:    "memory limit that is not a number",
			env:     map[string]string{"AIONOTEL_MEMORY_LIMIT_MIB": "lots"},
			wantErr: "limit_mib",
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cmd := otelcol.NewCommand(collector.Settings())
			cmd.SetArgs([]string{"validate", "--config", configPath})
			var out strings.Builder
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			err := cmd.ExecuteContext(context.Background())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("validate: %v\n%s", err, out.String())
			case tc.wantErr != "" && err == nil:
				t.Fatalf("validate succeeded, want an error mentioning %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("validate: %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// resolved loads collector-config.yaml through the distribution's providers
// and factories, as the running Collector does.
func resolved(t *testing.T) *otelcol.Config {
	t.Helper()
	set := collector.Settings().ConfigProviderSettings
	set.ResolverSettings.URIs = []string{"file:" + configPath}
	provider, err := otelcol.NewConfigProvider(set)
	if err != nil {
		t.Fatalf("NewConfigProvider: %v", err)
	}
	factories, err := collector.Components()
	if err != nil {
		t.Fatalf("Components: %v", err)
	}
	cfg, err := provider.Get(context.Background(), factories)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return cfg
}

// endpoints is what TestConfigEndpoints reads back from a resolved
// configuration.
type endpoints struct {
	grpc, http, prometheus, health, telemetryHost, jaeger string
	telemetryPort                                         int
	jaegerInsecure                                        bool
}

func readEndpoints(t *testing.T, cfg *otelcol.Config) endpoints {
	t.Helper()
	var e endpoints
	otlp, ok := cfg.Receivers[component.MustNewID("otlp")].(*otlpreceiver.Config)
	if !ok {
		t.Fatalf("otlp receiver config is %T", cfg.Receivers[component.MustNewID("otlp")])
	}
	if !otlp.Protocols.GRPC.HasValue() || !otlp.Protocols.HTTP.HasValue() {
		t.Fatal("the OTLP receiver must enable both gRPC and HTTP")
	}
	e.grpc = otlp.Protocols.GRPC.Get().NetAddr.Endpoint
	e.http = otlp.Protocols.HTTP.Get().ServerConfig.NetAddr.Endpoint
	prom, ok := cfg.Exporters[component.MustNewID("prometheus")].(*prometheusexporter.Config)
	if !ok {
		t.Fatalf("prometheus exporter config is %T", cfg.Exporters[component.MustNewID("prometheus")])
	}
	e.prometheus = prom.ServerConfig.NetAddr.Endpoint
	jaeger, ok := cfg.Exporters[component.MustNewIDWithName("otlp_grpc", "jaeger")].(*otlpexporter.Config)
	if !ok {
		t.Fatalf("otlp_grpc/jaeger exporter config is %T", cfg.Exporters[component.MustNewIDWithName("otlp_grpc", "jaeger")])
	}
	e.jaeger, e.jaegerInsecure = jaeger.ClientConfig.Endpoint, jaeger.ClientConfig.TLS.Insecure
	health, ok := cfg.Extensions[component.MustNewID("health_check")].(*healthcheckextension.Config)
	if !ok {
		t.Fatalf("health_check extension config is %T", cfg.Extensions[component.MustNewID("health_check")])
	}
	e.health = health.Config.LegacyConfig.ServerConfig.NetAddr.Endpoint
	tel, ok := cfg.Service.Telemetry.(*otelconftelemetry.Config)
	if !ok {
		t.Fatalf("telemetry config is %T", cfg.Service.Telemetry)
	}
	if len(tel.Metrics.Readers) != 1 || tel.Metrics.Readers[0].Pull == nil ||
		tel.Metrics.Readers[0].Pull.Exporter.Prometheus == nil {
		t.Fatalf("want one pull Prometheus reader for the Collector's own metrics, got %+v", tel.Metrics.Readers)
	}
	p := tel.Metrics.Readers[0].Pull.Exporter.Prometheus
	if p.Host == nil || p.Port == nil {
		t.Fatalf("Collector metrics reader without host or port: %+v", p)
	}
	e.telemetryHost, e.telemetryPort = *p.Host, *p.Port
	return e
}

func TestConfigEndpoints(t *testing.T) {
	testCases := []struct {
		name string
		env  map[string]string
		want endpoints
	}{
		{
			name: "loopback defaults",
			want: endpoints{
				grpc: "127.0.0.1:4317", http: "127.0.0.1:4318", prometheus: "127.0.0.1:8889",
				health: "127.0.0.1:13133", telemetryHost: "127.0.0.1", telemetryPort: 8888,
				// Not 4317: that is this Collector's own receiver.
				jaeger: "127.0.0.1:14317", jaegerInsecure: true,
			},
		},
		{
			name: "overrides",
			env: map[string]string{
				"AIONOTEL_OTLP_GRPC_ENDPOINT":     "0.0.0.0:5317",
				"AIONOTEL_OTLP_HTTP_ENDPOINT":     "0.0.0.0:5318",
				"AIONOTEL_PROMETHEUS_ENDPOINT":    "0.0.0.0:9889",
				"AIONOTEL_HEALTH_CHECK_ENDPOINT":  "0.0.0.0:14133",
				"AIONOTEL_COLLECTOR_METRICS_HOST": "0.0.0.0",
				"AIONOTEL_COLLECTOR_METRICS_PORT": "9888",
				"AIONOTEL_JAEGER_ENDPOINT":        "jaeger:4317",
				"AIONOTEL_JAEGER_INSECURE":        "false",
			},
			want: endpoints{
				grpc: "0.0.0.0:5317", http: "0.0.0.0:5318", prometheus: "0.0.0.0:9889",
				health: "0.0.0.0:14133", telemetryHost: "0.0.0.0", telemetryPort: 9888,
				jaeger: "jaeger:4317",
			},
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if got := readEndpoints(t, resolved(t)); got != tc.want {
				t.Errorf("endpoints:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestConfigPipelines pins what the dashboard and the alerts rely on: metrics
// reach the prometheus exporter with the translation that yields the catalog's
// Prometheus names and with OpenMetrics (exemplars), traces go to Jaeger
// (otlp_grpc/jaeger) and the debug exporter, logs have a pipeline of their own,
// the memory limiter is the only processor, and health_check runs.
func TestConfigPipelines(t *testing.T) {
	cfg := resolved(t)
	if got := cfg.Service.Extensions; len(got) != 1 || got[0] != component.MustNewID("health_check") {
		t.Errorf("service extensions = %v, want [health_check]", got)
	}

	prom := cfg.Exporters[component.MustNewID("prometheus")].(*prometheusexporter.Config)
	if got := string(prom.TranslationStrategy); got != "UnderscoreEscapingWithSuffixes" {
		t.Errorf("prometheus translation_strategy = %q, want UnderscoreEscapingWithSuffixes (the names of the catalog)", got)
	}
	if !prom.EnableOpenMetrics {
		t.Error("prometheus enable_open_metrics is off: exemplars never reach Prometheus")
	}
	if prom.Namespace != "" {
		t.Errorf("prometheus namespace = %q would prefix every name of the catalog", prom.Namespace)
	}
	debug := cfg.Exporters[component.MustNewID("debug")].(*debugexporter.Config)
	if debug.Verbosity != configtelemetry.LevelBasic {
		t.Errorf("debug verbosity = %v, want basic by default", debug.Verbosity)
	}

	want := map[pipeline.Signal][]string{
		pipeline.SignalMetrics: {"prometheus", "debug"},
		pipeline.SignalTraces:  {"otlp_grpc/jaeger", "debug"},
		pipeline.SignalLogs:    {"debug"},
	}
	for signal, exporters := range want {
		p, ok := cfg.Service.Pipelines[pipeline.NewID(signal)]
		if !ok {
			t.Errorf("no %s pipeline", signal)
			continue
		}
		if len(p.Receivers) != 1 || p.Receivers[0] != component.MustNewID("otlp") {
			t.Errorf("%s receivers = %v, want [otlp]", signal, p.Receivers)
		}
		// No batch processor: deprecated upstream, and pointless in front
		// of the pull exporter (see collector-config.yaml).
		if len(p.Processors) != 1 || p.Processors[0] != component.MustNewID("memory_limiter") {
			t.Errorf("%s processors = %v, want [memory_limiter]", signal, p.Processors)
		}
		got := make([]string, len(p.Exporters))
		for i, id := range p.Exporters {
			got[i] = id.String()
		}
		if strings.Join(got, ",") != strings.Join(exporters, ",") {
			t.Errorf("%s exporters = %v, want %v", signal, got, exporters)
		}
	}
}
