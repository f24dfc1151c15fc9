// Package benchbody makes the compact metrics requests that the benchmarks
// of the engine and of its JSON index share, so that their figures are
// taken on the same bytes.
package benchbody

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
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

// Body is a valid request of s.Cases cases with s.Checks tool checks
// each, every optional member present, as the CLI writes it
// (convert.Request.Marshal): compact, members in RFC 8785 order, numbers
// as ECMAScript writes them. It is its own canonical form.
func (s Size) Body() []byte { return s.body(true, false) }

// Clocked is Body with each latency as a program computes it from two
// clock readings, a double of 16 or 17 digits (1037.0001280245979 rather
// than 1037.001), written as its shortest digits, as JSON encoders write
// doubles. It is also its own canonical form.
func (s Size) Clocked() []byte { return s.body(true, true) }

// Reordered is Body with each object's members in another order, as a
// client that does not sort them sends it: the same request, whose cases
// the engine must write in canonical form.
func (s Size) Reordered() []byte { return s.body(false, false) }

func (s Size) body(sorted, clocked bool) []byte {
	var b bytes.Buffer
	if sorted {
		b.WriteString(`{"cases":[`)
	} else {
		b.WriteString(`{"run_id":"bench-run-2026-11-23","cost_currency":"USD","cases":[`)
	}
	names := []string{"case_id", "status", "latency_ms", "repeat_group", "input_tokens", "output_tokens", "cost", "tool_checks", "boundary_violations", "trace"}
	if sorted {
		slices.Sort(names)
	}
	for i := range s.Cases {
		if i > 0 {
			b.WriteByte(',')
		}
		var checks bytes.Buffer
		for j := range s.Checks {
			if j > 0 {
				checks.WriteByte(',')
			}
			fmt.Fprintf(&checks, `{"name":"tool.check_%02d.verify","passed":%t}`, j, (i+j)%5 != 0)
		}
		latency := float64(1000+i*37%90000) + float64(i%1000)/1000
		if clocked { // the difference of two readings of seconds since the epoch, in ms
			start := 1.7e9 + float64(i)*0.731
			latency = (start + latency/1000 - start) * 1000
		}
		m := map[string]string{
			"boundary_violations": `["scope_escape"]`,
			"case_id":             fmt.Sprintf(`"suite.module.test_case_%04d"`, i),
			"cost":                number(float64(1+i*31%999999) / 1e6),
			"input_tokens":        strconv.Itoa(1000 + i*13),
			"latency_ms":          number(latency),
			"output_tokens":       strconv.Itoa(200 + i*7),
			"repeat_group":        fmt.Sprintf(`"group-%03d"`, i/3),
			"status":              `"` + [...]string{"pass", "fail", "error", "timeout"}[i%4] + `"`,
			"tool_checks":         "[" + checks.String() + "]",
			"trace":               fmt.Sprintf(`{"expected_steps":%d,"observed_steps":%d}`, 10+i%7, 10-i%5),
		}
		b.WriteByte('{')
		for k, name := range names {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s":%s`, name, m[name])
		}
		b.WriteByte('}')
	}
	if sorted {
		b.WriteString(`],"cost_currency":"USD","run_id":"bench-run-2026-11-23"}`)
	} else {
		b.WriteString(`]}`)
	}
	return b.Bytes()
}

// number writes f as JSON encoders and ECMAScript do.
func number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

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
