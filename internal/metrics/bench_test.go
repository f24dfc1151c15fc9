package metrics_test

import (
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/bytedance/sonic"
	gojson "github.com/goccy/go-json"
	"github.com/minio/simdjson-go"

	"github.com/evalmeter/evalmeter/internal/benchbody"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// benchVector is a 500-case request of about 130 KB from the vectors.
const benchVector = "random-20-n500-reordered"

// BenchmarkCompute measures the whole engine (parse, validate, canonicalize,
// hash, aggregate) beside baselines on the same bytes: validators that only
// scan the JSON, a decoder that builds it, and SHA-256 of the body. `make
// bench` prints the ratios and checks the targets of issue 13.
func BenchmarkCompute(b *testing.B) {
	body := benchBody(b)
	run := func(name string, f func() bool) { benchbody.Run(b, name, body, f) }
	// The engine as the API runs it: a Meter from its pool, reused.
	var meter metrics.Meter
	run("engine", func() bool {
		m, err := meter.Compute(body)
		return err == nil && m.CaseCount == 500
	})
	run("engine-new", func() bool {
		m, err := metrics.Compute(body)
		return err == nil && m.CaseCount == 500
	})
	run("careful", func() bool {
		m, err := metrics.ComputeCarefully(body)
		return err == nil && m.CaseCount == 500
	})
	run("json.Valid", func() bool { return json.Valid(body) })
	run("sonic.Valid", func() bool { return sonic.Valid(body) })
	run("go-json.Valid", func() bool { return gojson.Valid(body) })
	if simdjson.SupportedCPU() {
		var reuse *simdjson.ParsedJson
		run("simdjson.Parse", func() bool {
			var err error
			reuse, err = simdjson.Parse(body, reuse)
			return err == nil
		})
	} else {
		b.Log("simdjson.Parse: not measured; this CPU lacks AVX2 or CLMUL")
	}
	run("sha256", func() bool { return sha256.Sum256(body) != [sha256.Size]byte{} })
	run("json.Unmarshal-map", func() bool {
		var m map[string]any
		return json.Unmarshal(body, &m) == nil
	})
}

func benchBody(b *testing.B) []byte {
	for _, v := range loadVectors(b) {
		if v.Name == benchVector {
			return []byte(v.Body)
		}
	}
	b.Fatalf("vector %s not found", benchVector)
	return nil
}

// BenchmarkComputeSizes measures the engine on compact bodies of about 10,
// 130 and 256 KB (the limit), as the CLI writes them, beside the baselines
// of its targets on the same bytes: `make bench` prints the ratios. It
// also times the engine on the same requests with their members in
// another order (reordered), as a client that does not sort them sends
// them: each case must then be written in canonical form; and with
// latencies of 16–17 digits (clocked), as programs compute them.
func BenchmarkComputeSizes(b *testing.B) {
	for _, size := range benchbody.Sizes {
		body := size.Body()
		if len(body) > metrics.MaxBodyBytes {
			b.Fatalf("%s body is %d bytes, over the limit", size.Name, len(body))
		}
		run := func(name string, f func() bool) { benchbody.Run(b, size.Name+"/"+name, body, f) }
		var meter metrics.Meter
		run("engine", func() bool {
			m, err := meter.Compute(body)
			return err == nil && m.CaseCount == size.Cases
		})
		run("engine-new", func() bool {
			m, err := metrics.Compute(body)
			return err == nil && m.CaseCount == size.Cases
		})
		reordered := size.Reordered()
		benchbody.Run(b, size.Name+"/engine-reordered", reordered, func() bool {
			m, err := meter.Compute(reordered)
			return err == nil && m.CaseCount == size.Cases
		})
		clocked := size.Clocked()
		benchbody.Run(b, size.Name+"/engine-clocked", clocked, func() bool {
			m, err := meter.Compute(clocked)
			return err == nil && m.CaseCount == size.Cases
		})
		// The careful parser alone, which reads the bodies the fast path
		// gives up on (and, with GODEBUG=cpu.avx2=off, without the index).
		run("careful", func() bool {
			m, err := metrics.ComputeCarefully(body)
			return err == nil && m.CaseCount == size.Cases
		})
		run("json.Valid", func() bool { return json.Valid(body) })
		run("sonic.Valid", func() bool { return sonic.Valid(body) })
		run("sha256", func() bool { return sha256.Sum256(body) != [sha256.Size]byte{} })
	}
}
