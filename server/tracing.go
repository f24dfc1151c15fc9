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

// traced wraps h in otelhttp: a server span per request. otelhttp records
// the method, path, status, sizes, host, client address and user agent; no
// other header (never Authorization), no query string and no body.
//
// The API is public: a caller's traceparent would make its request's span
// a child in the caller's trace, and its sampled flag would force sampling
// under a parent-based sampler. So, unless trustCaller (a trusted proxy
// in front sets traceparent), each request starts a trace of its own, with
// a link to the caller's span context.
func traced(h http.Handler, tp trace.TracerProvider, p propagation.TextMapPropagator, trustCaller bool) http.Handler {
	if p == nil {
		p = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	opts := []otelhttp.Option{
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(p),
		// Prometheus has the request metrics (telemetry.go).
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	}
	if !trustCaller {
		opts = append(opts, otelhttp.WithPublicEndpointFn(func(*http.Request) bool { return true }))
	}
	return otelhttp.NewHandler(h, "evalmeter-api", opts...)
}

// forgetPath replaces the url.path otelhttp recorded verbatim in r's span
// with "unmatched", for requests that matched no operation (404, 405):
// their path is whatever the caller typed, an API key pasted into the URL
// included. The exported span has only the fixed value; a sampler or a
// processor's OnStart sees the span as it starts, with the original (the
// SDK's own keep nothing of it).
func forgetPath(r *http.Request) {
	trace.SpanFromContext(r.Context()).SetAttributes(semconv.URLPath(routeUnmatched))
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
