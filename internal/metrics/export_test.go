package metrics

import (
	"crypto/sha256"

	"github.com/evalmeter/evalmeter/api"
)

// ComputeCarefully is Compute without the fast path, for tests that
// compare the two.
func ComputeCarefully(body []byte) (*api.Metrics, error) {
	var p parser
	p.reset(body, sha256.New(), new(Request))
	p.careful = true
	r, err := p.parse()
	if err != nil {
		return nil, err
	}
	return r.Metrics(), nil
}

// TakesFastPath reports whether the fast path reads body to the end.
func TakesFastPath(body []byte) bool {
	var p parser
	p.reset(body, nil, new(Request))
	return p.readFast()
}

// CasesTakenAsWritten returns how many of body's cases the fast path
// takes as their own canonical form.
func CasesTakenAsWritten(body []byte) int {
	var p parser
	p.reset(body, nil, new(Request))
	p.readFast()
	return p.asWritten
}
