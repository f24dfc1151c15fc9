package benchbody_test

import (
	"bytes"
	"testing"

	"github.com/evalmeter/evalmeter/internal/benchbody"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// TestBodies checks that each body is a valid request of its size, that
// Body and Clocked are their own canonical forms, as the CLI writes
// requests, and that Reordered is the same request in another order.
func TestBodies(t *testing.T) {
	for _, size := range benchbody.Sizes {
		body := size.Body()
		canonical, err := metrics.Canonical(body)
		if err != nil {
			t.Fatalf("%s: %v", size.Name, err)
		}
		if !bytes.Equal(canonical, body) {
			t.Errorf("%s: the body is not its canonical form:\n%.300s\nwant\n%.300s", size.Name, body, canonical)
		}
		clocked := size.Clocked()
		if c, err := metrics.Canonical(clocked); err != nil || !bytes.Equal(c, clocked) || bytes.Equal(clocked, body) {
			t.Errorf("%s: Clocked is not its canonical form, or is Body: %v", size.Name, err)
		}
		reordered := size.Reordered()
		if bytes.Equal(reordered, body) {
			t.Errorf("%s: Reordered is Body", size.Name)
		}
		if c, err := metrics.Canonical(reordered); err != nil || !bytes.Equal(c, canonical) {
			t.Errorf("%s: Reordered is not the same request: %v", size.Name, err)
		}
		m, err := metrics.Compute(body)
		if err != nil || m.CaseCount != size.Cases || len(body) > metrics.MaxBodyBytes {
			t.Errorf("%s: %d bytes, %v cases, %v", size.Name, len(body), m, err)
		}
	}
}
