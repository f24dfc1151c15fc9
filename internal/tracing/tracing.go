// Package tracing sets up OpenTelemetry tracing for evalmeter api from the
// standard OTEL_* environment. It is off unless that environment asks for
// traces: a process without OTEL_* variables builds nothing.
//
// The server and the ledger take the TracerProvider as a value
// (server.Config, ledger.Options); nothing here sets OpenTelemetry's globals.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES says otherwise.
const ServiceName = "evalmeter-api"

// ShutdownTimeout bounds the flush of the spans still buffered at exit, so
// that an unreachable collector cannot hold a pod past its grace period.
const ShutdownTimeout = 5 * time.Second

// Configured reports whether the environment read by lookup (the shape of
// os.LookupEnv) asks for traces: OTEL_SDK_DISABLED is not true, and
// OTEL_TRACES_EXPORTER names an exporter other than "none", or an OTLP
// endpoint is set. An explicit OTEL_TRACES_EXPORTER=none wins over an
// endpoint, so that one variable turns tracing off.
func Configured(lookup func(string) (string, bool)) bool {
	get := getter(lookup)
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch get("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "":
		return get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return true
	}
}

// Tracing is tracing switched on: a TracerProvider that batches spans to the
// configured exporter.
type Tracing struct {
	Provider *sdktrace.TracerProvider
	// Propagator reads a caller's W3C traceparent, tracestate and baggage.
	Propagator propagation.TextMapPropagator
	// Exporter, Protocol (OTLP only) and Endpoint (OTLP only) say where
	// spans go, for a log line. Endpoint carries no user information or
	// query, and no header is ever shown.
	Exporter, Protocol, Endpoint string
}

// Setup builds tracing from the process environment, which the exporters
// and the SDK read themselves (OTEL_EXPORTER_OTLP_*, OTEL_BSP_*,
// OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, ...). It
// returns nil, nil when the environment does not ask for traces (see
// Configured). version becomes service.version when not empty.
func Setup(ctx context.Context, version string) (*Tracing, error) {
	if !Configured(os.LookupEnv) {
		return nil, nil
	}
	get := getter(os.LookupEnv)
	t := &Tracing{
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		Exporter:   get("OTEL_TRACES_EXPORTER"),
	}
	if t.Exporter == "" {
		t.Exporter = "otlp"
	}
	if t.Exporter == "otlp" {
		t.Protocol, t.Endpoint = protocol(get), endpoint(get)
	}
	exporter, err := newExporter(ctx, t.Exporter, t.Protocol)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := newResource(ctx, version)
	if err != nil {
		exporter.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w (write key=value pairs separated by commas, values percent-encoded)", err)
	}
	t.Provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return t, nil
}

// newResource describes the process: service.name evalmeter-api and
// service.version, unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say
// otherwise.
func newResource(ctx context.Context, version string) (*resource.Resource, error) {
	defaults := []attribute.KeyValue{semconv.ServiceName(ServiceName)}
	if version != "" {
		defaults = append(defaults, semconv.ServiceVersion(version))
	}
	// Later detectors win: the environment over the defaults.
	return resource.New(ctx, resource.WithAttributes(defaults...), resource.WithTelemetrySDK(), resource.WithFromEnv())
}

// newExporter builds the exporter named as the contrib package autoexport
// would (its v0.67.0 does not build against otel v1.47.0): otlp over
// http/protobuf or grpc, or console (stdout). The OTLP exporters read their
// endpoint, headers, timeout, compression and certificates from the
// environment themselves.
func newExporter(ctx context.Context, name, protocol string) (sdktrace.SpanExporter, error) {
	switch {
	case name == "otlp" && protocol == "http/protobuf":
		return otlptracehttp.New(ctx)
	case name == "otlp" && protocol == "grpc":
		return otlptracegrpc.New(ctx)
	case name == "otlp":
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q is not supported: use http/protobuf or grpc", protocol)
	case name == "console":
		return stdouttrace.New()
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q is not supported: use otlp, console or none", name)
	}
}

// Shutdown flushes the spans still buffered and stops the exporter, within
// ShutdownTimeout at most.
func (t *Tracing) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ShutdownTimeout)
	defer cancel()
	if err := t.Provider.Shutdown(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("flushing spans: the exporter did not finish within %s, the last spans are lost: %w", ShutdownTimeout, err)
		}
		return fmt.Errorf("flushing spans: %w", err)
	}
	return nil
}

// getter reads trimmed values through lookup; unset reads as empty.
func getter(lookup func(string) (string, bool)) func(string) string {
	return func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
}

// protocol is the OTLP protocol of traces.
func protocol(get func(string) string) string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := get(name); p != "" {
			return p
		}
	}
	return "http/protobuf"
}

// endpoint is the OTLP endpoint of traces, without what could be a
// credential (user information, query).
func endpoint(get func(string) string) string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		e := get(name)
		if e == "" {
			continue
		}
		u, err := url.Parse(e)
		if err == nil && u.Host == "" {
			u, err = url.Parse("//" + e) // host:port, as gRPC endpoints may be written
		}
		if err != nil || u.Host == "" {
			return "(unparsed " + name + ")"
		}
		return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	}
	return "(the exporter's default, on localhost)"
}
