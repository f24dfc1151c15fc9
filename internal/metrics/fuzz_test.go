package metrics_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// FuzzCompute checks, for any body: no panic; the verdict matches the
// oracle (I-JSON, the JSON Schema and the two extra rules); and for a valid
// body, the canonical form equals gowebpki/jcs's, is what canonical_sha256
// hashes, is stable (canonicalize →
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

func checkCanonical(t *testing.T, body []byte, m *api.Metrics) {
	t.Helper()
	canonical, err := metrics.Canonical(body)
	if err != nil {
		t.Fatalf("Canonical fails where Compute succeeds: %v", err)
	}
	reference, err := jcs.Transform(body)
	if err != nil {
		t.Fatalf("jcs.Transform: %v", err)
	}
	if !bytes.Equal(canonical, reference) {
		t.Fatalf("canonical form differs from gowebpki/jcs:\n got %s\nwant %s", canonical, reference)
	}
	if sum := sha256.Sum256(canonical); hex.EncodeToString(sum[:]) != m.Integrity.CanonicalSHA256 {
		t.Fatalf("canonical_sha256 %s is not the SHA-256 of the canonical form %s", m.Integrity.CanonicalSHA256, canonical)
	}
	twice, err := metrics.Canonical(canonical)
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, canonical)
	}
	if !bytes.Equal(canonical, twice) {
		t.Fatalf("canonical form is not stable:\n%s\n%s", canonical, twice)
	}
	again, err := metrics.Compute(canonical)
	if err != nil {
		t.Fatalf("canonical form does not compute: %v", err)
	}
	if diff := cmp.Diff(m, again); diff != "" {
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
