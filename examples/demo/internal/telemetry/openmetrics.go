package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// newPrometheusReader is autoexport's "prometheus" metric reader (same
// OTEL_EXPORTER_PROMETHEUS_HOST and _PORT, same defaults, /metrics) with one
// difference: the endpoint serves OpenMetrics to scrapers that ask for it,
// the only text format that carries exemplars. autoexport's handler serves
// the classic text format only, which drops them.
func newPrometheusReader() (sdkmetric.Reader, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	host, port := os.Getenv("OTEL_EXPORTER_PROMETHEUS_HOST"), os.Getenv("OTEL_EXPORTER_PROMETHEUS_PORT")
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "9464"
	}
	addr := net.JoinHostPort(host, port)
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("binding address %s for Prometheus exporter: %w", addr, err), exp.Shutdown(context.Background()))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	srv := &http.Server{Handler: mux, ReadTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			otel.Handle(fmt.Errorf("the Prometheus HTTP server exited unexpectedly: %w", err))
		}
	}()
	return readerWithServer{Reader: exp, srv: srv}, nil
}

// readerWithServer stops the /metrics server with the reader.
type readerWithServer struct {
	sdkmetric.Reader
	srv *http.Server
}

func (r readerWithServer) Shutdown(ctx context.Context) error {
	return errors.Join(r.Reader.Shutdown(ctx), r.srv.Shutdown(ctx))
}
