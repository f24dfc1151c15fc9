// Package benchbody makes the compact metrics requests that the benchmarks
// of the engine and of its JSON index share, so that their figures are
// taken on the same bytes.
package benchbody

import (
	"bytes"
	"fmt"
	"testing"
)

// A Size is one of the benchmarked bodies.
type Size struct {
	Name          string // its size, as the benchmarks name it
	Cases, Checks int    // the request's cases, and tool checks per case
}

// Sizes are bodies of about 10 KB, 130 KB and 256 KB (the limit).
var Sizes = []Size{
	{"10KB", 30, 1},
	{"130KB", 410, 1},
	{"256KB", 500, 5},
}

// Body is a valid compact request of s.Cases cases with s.Checks tool
// checks each, every optional member present, as the CLI writes it.
func (s Size) Body() []byte {
	var b bytes.Buffer
	b.WriteString(`{"run_id":"bench-run-2026-11-23","cost_currency":"USD","cases":[`)
	for i := range s.Cases {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"case_id":"suite.module.test_case_%04d","status":"%s","latency_ms":%d.%03d,"repeat_group":"group-%03d",`+
			`"input_tokens":%d,"output_tokens":%d,"cost":0.%06d,"tool_checks":[`,
			i, [...]string{"pass", "fail", "error", "timeout"}[i%4], 1000+i*37%90000, i%1000, i/3, 1000+i*13, 200+i*7, 1+i*31%999999)
		for j := range s.Checks {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"tool.check_%02d.verify","passed":%t}`, j, (i+j)%5 != 0)
		}
		fmt.Fprintf(&b, `],"boundary_violations":["scope_escape"],"trace":{"expected_steps":%d,"observed_steps":%d}}`, 10+i%7, 10-i%5)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// Run runs f as the sub-benchmark name of b, in bytes of body a second;
// f reports whether it did its work on body, and the benchmark fails when
// it did not.
func Run(b *testing.B, name string, body []byte, f func() bool) {
	b.Run(name, func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !f() {
				b.Fatalf("%s fails on the body", name)
			}
		}
	})
}
