// Package tracingtest reads recorded OpenTelemetry spans for tests, to check
// what a span exports.
package tracingtest

import (
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// SpanText is everything a span exports as text: its name, status
// description, attributes (as key=value), resource attributes, events (their
// names and attributes) and links' attributes. A test that no span leaks a
// secret looks for it in each of these.
func SpanText(s sdktrace.ReadOnlySpan) []string {
	texts := []string{s.Name(), s.Status().Description}
	add := func(kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			texts = append(texts, string(kv.Key)+"="+kv.Value.Emit())
		}
	}
	add(s.Attributes())
	add(s.Resource().Attributes())
	for _, e := range s.Events() {
		texts = append(texts, e.Name)
		add(e.Attributes)
	}
	for _, l := range s.Links() {
		add(l.Attributes)
	}
	return texts
}
