package metrics_test

import (
	"encoding/json"
	"testing"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// benchVector is a 500-case request of about 130 KB from the vectors.
const benchVector = "random-20-n500-reordered"

// BenchmarkCompute measures the whole engine (parse, validate, canonicalize,
// hash, aggregate) beside two baselines on the same bytes. `make bench`
// prints the ratios; the targets are engine ≤ 1.5 × json.Valid and
// ≤ 0.5 × Unmarshal, under 2,000 allocations.
func BenchmarkCompute(b *testing.B) {
	var body []byte
	for _, v := range loadVectors(b) {
		if v.Name == benchVector {
			body = []byte(v.Body)
		}
	}
	if body == nil {
		b.Fatalf("vector %s not found", benchVector)
	}

	b.Run("engine", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			m, err := metrics.Compute(body)
			if err != nil || m.CaseCount != 500 {
				b.Fatalf("Compute: %v", err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("json.Unmarshal-map", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
