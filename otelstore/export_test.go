package otelstore

// WithHandler is withHandler for the external tests: the error handler the
// decorator reports to instead of otel.Handle.
var WithHandler = withHandler
