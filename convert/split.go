package convert

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// splitCases cuts the cases into runs that each fit one metrics request: at
// most MaxCases cases and metrics.MaxBodyBytes bytes, in case order.
func (r *Request) splitCases() ([][]Case, error) {
	var parts [][]Case
	var part []Case
	size := 0
	for _, c := range r.Cases {
		b, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		// 200 bytes leave room for the run id, the currency and the commas.
		if len(b)+200 > metrics.MaxBodyBytes {
			return nil, fmt.Errorf("case %s alone is larger than a request may be", c.ID)
		}
		if len(part) == MaxCases || size+len(b)+1+200 > metrics.MaxBodyBytes {
			parts = append(parts, part)
			part, size = nil, 0
		}
		part = append(part, c)
		size += len(b) + 1
	}
	return append(parts, part), nil
}

// Parts cuts a request into requests that each fit the service's limits:
// at most MaxCases cases and metrics.MaxBodyBytes bytes, in case order. Part i of n
// is named RUN.p{i}of{n}. A request that fits is returned whole, its run id
// unchanged.
//
// Each part's metrics are those of its own cases: its rates and percentiles
// are not the run's, and a repeat group cut between parts counts in each.
func (r *Request) Parts() ([]Request, error) {
	cases, err := r.splitCases()
	if err != nil {
		return nil, err
	}
	if len(cases) == 1 {
		return []Request{*r}, nil
	}
	reqs := make([]Request, len(cases))
	for i, cs := range cases {
		suffix := ".p" + strconv.Itoa(i+1) + "of" + strconv.Itoa(len(cases))
		id, _ := fitID(r.RunID, suffix, maxIDLen)
		reqs[i] = Request{RunID: id, Cases: cs}
		for _, c := range cs {
			if c.Cost != nil {
				reqs[i].CostCurrency = r.CostCurrency
				break
			}
		}
	}
	return reqs, nil
}
