package metrics

import (
	"crypto/sha256"

	"github.com/evalmeter/evalmeter/api"
)

// ComputeCarefully is Compute without the fast path, for tests that
// compare the two.
func ComputeCarefully(body []byte) (*api.Metrics, error) {
	p := newParser(body, sha256.New())
	p.careful = true
	r, err := p.parse()
	if err != nil {
		return nil, err
	}
	return r.Metrics(), nil
}

// TakesFastPath reports whether the fast path reads body to the end.
func TakesFastPath(body []byte) bool {
	return newParser(body, nil).readFast()
}

// CasesTakenAsWritten returns how many of body's cases the fast path
// takes as their own canonical form.
func CasesTakenAsWritten(body []byte) int {
	p := newParser(body, nil)
	p.readFast()
	return p.asWritten
}
