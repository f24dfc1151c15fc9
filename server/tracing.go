package server

import (
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// traced wraps h in otelhttp: a server span per request, joined to the
// caller's trace when it sends a W3C traceparent. otelhttp records the
// method, path, status, sizes, host, client address and user agent; no
// other header (never Authorization), no query string and no body.
func traced(h http.Handler, tp trace.TracerProvider, p propagation.TextMapPropagator) http.Handler {
	if p == nil {
		p = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return otelhttp.NewHandler(h, "evalmeter-api",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(p),
		// Prometheus has the request metrics (telemetry.go).
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
}

// nameSpan names r's span "METHOD template" after the mux route it matched,
// as semantic conventions ask. A request that matched none (404, 405) keeps
// otelhttp's name, its method alone: the path it sent is anything at all.
func nameSpan(r *http.Request) {
	route := mux.CurrentRoute(r)
	if route == nil {
		return
	}
	template, err := route.GetPathTemplate()
	if err != nil {
		return
	}
	span := trace.SpanFromContext(r.Context())
	span.SetName(r.Method + " " + template)
	span.SetAttributes(semconv.HTTPRoute(template))
}

// traceAttrs joins a request's log line to its trace.
func traceAttrs(r *http.Request) []slog.Attr {
	sc := trace.SpanContextFromContext(r.Context())
	if !sc.IsValid() {
		return nil
	}
	return []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}
