package metrics_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// FuzzCompute checks, for any body: no panic; the verdict matches the
// oracle (I-JSON, the JSON Schema and the two extra rules); and for a valid
// body, the canonical form equals gowebpki/jcs's, is stable (canonicalize →
// parse → canonicalize gives the same bytes) and gives the same metrics.
func FuzzCompute(f *testing.F) {
	// Large bodies make mutation and minimization crawl; TestSchemaAgreesWithEngine
	// and TestCanonicalMatchesJCS cover them on every run.
	const maxSeed = 8 << 10
	for _, v := range loadVectors(f) {
		if len(v.Body) <= maxSeed {
			f.Add([]byte(v.Body))
		}
	}
	for _, s := range edgeCases() {
		if len(s) <= maxSeed {
			f.Add([]byte(s))
		}
	}
	o := newOracle(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		status, m, err := engineStatus(t, body)
		if want, why := o.status(body); status != want {
			t.Fatalf("engine says %d (%v), oracle says %d (%s)", status, err, want, why)
		}
		if status != http.StatusOK {
			return
		}
		checkCanonical(t, body, m)
	})
}

func checkCanonical(t *testing.T, body []byte, m *metrics.Metrics) {
	t.Helper()
	r, err := metrics.Parse(body)
	if err != nil {
		t.Fatalf("Parse fails where Compute succeeds: %v", err)
	}
	canonical := r.AppendCanonical(nil)
	reference, err := jcs.Transform(body)
	if err != nil {
		t.Fatalf("jcs.Transform: %v", err)
	}
	if !bytes.Equal(canonical, reference) {
		t.Fatalf("canonical form differs from gowebpki/jcs:\n got %s\nwant %s", canonical, reference)
	}
	again, err := metrics.Parse(canonical)
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, canonical)
	}
	if twice := again.AppendCanonical(nil); !bytes.Equal(canonical, twice) {
		t.Fatalf("canonical form is not stable:\n%s\n%s", canonical, twice)
	}
	if diff := cmp.Diff(m, again.Metrics()); diff != "" {
		t.Fatalf("metrics of the canonical form differ (-body +canonical):\n%s", diff)
	}
}

// TestCanonicalMatchesJCS runs the canonical checks over every valid body
// of the corpus on each plain `go test`.
func TestCanonicalMatchesJCS(t *testing.T) {
	valid := 0
	for name, body := range corpus(t) {
		status, m, _ := engineStatus(t, body)
		if status != http.StatusOK {
			continue
		}
		valid++
		t.Run(name, func(t *testing.T) { checkCanonical(t, body, m) })
	}
	if valid < 60 {
		t.Fatalf("only %d valid bodies in the corpus", valid)
	}
}
