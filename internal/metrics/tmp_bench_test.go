package metrics_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

func BenchmarkTmp(b *testing.B) {
	body := benchBody(b)
	var buf bytes.Buffer
	json.Compact(&buf, body)
	compact := buf.Bytes()
	canon, _ := metrics.Canonical(body)
	for _, c := range []struct {
		name string
		body []byte
	}{{"orig", body}, {"compact", compact}, {"canon", canon}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				metrics.Compute(c.body)
			}
		})
		b.Run(c.name+"-valid", func(b *testing.B) {
			for b.Loop() {
				json.Valid(c.body)
			}
		})
	}
}
