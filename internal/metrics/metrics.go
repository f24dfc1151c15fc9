// Package metrics is evalmeter's metrics engine: the pure function from a
// metrics request's bytes to its metrics and canonical digest. It reads the request
// strictly (docs/design.md#51-reading-the-body), writes it in canonical form (RFC 8785),
// hashes that and aggregates the metrics of api.Metrics with the rules of
// docs/design.md#4-metrics-rules.
//
// The engine is pure: no I/O, no clock, no global state. The same body always
// gives the same metrics or the same error.
package metrics

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"math/bits"
	"slices"

	"github.com/evalmeter/evalmeter/api"
)

// SchemaVersion is the schema_version of the schema document and the result.
const SchemaVersion = "1.0"

// Compute parses and validates body and returns its metrics. Errors are
// *api.Error values.
func Compute(body []byte) (*api.Metrics, error) {
	return new(Meter).Compute(body)
}

// A Meter reads one request at a time and keeps its memory for the next,
// so that a server that reuses Meters (from a sync.Pool) allocates little
// more per request than the result. The zero Meter is ready to use. A
// Meter is not safe for concurrent use.
type Meter struct {
	p    parser
	req  Request
	hash hash.Hash
}

// Parse is the package's Parse with m's memory. The Request it returns is
// m's, valid until m's next call.
func (m *Meter) Parse(body []byte) (*Request, error) {
	if m.hash == nil {
		m.hash = sha256.New()
	}
	m.p.reset(body, m.hash, &m.req)
	return m.p.parse()
}

// Compute is the package's Compute with m's memory.
func (m *Meter) Compute(body []byte) (*api.Metrics, error) {
	r, err := m.Parse(body)
	if err != nil {
		return nil, err
	}
	return r.Metrics(), nil
}

// Digest is the SHA-256 of the request's canonical form.
func (r *Request) Digest() [sha256.Size]byte { return r.digest }

// tally accumulates a request's metrics case by case.
type tally struct {
	statuses   [len(statusNames)]int // by status: an index, not a switch, as statuses come in any mix
	latencies  []float64
	ranked     []float64 // latencies, reordered to find percentiles
	tokens     api.TokensReported
	costs      []number
	tools      api.ToolChecks
	violations api.BoundaryViolations
	trace      api.TraceCompleteness
	groupNames byteSet
	groups     []group // by number in groupNames
}

// group is a repeat_group's cases so far.
type group struct {
	size   int32 // at most MaxCases
	status status
	mixed  bool
}

// reset empties t, keeping its storage.
func (t *tally) reset() {
	*t = tally{
		latencies:  t.latencies[:0],
		ranked:     t.ranked[:0],
		costs:      t.costs[:0],
		groupNames: t.groupNames, // reset by the first repeat group
		groups:     t.groups[:0],
	}
}

// init sizes the tally for up to n cases.
func (t *tally) init(n int) {
	t.latencies = slices.Grow(t.latencies, n)
}

func (t *tally) add(c *observation) {
	t.statuses[c.status]++
	// -0 is 0: percentiles must not depend on which of the two came first.
	t.latencies = append(t.latencies, c.latency.f+0)
	if c.has&(hasInput|hasOutput) != 0 {
		t.tokens.Cases++
		t.tokens.Input += int64(c.input.f)
		t.tokens.Output += int64(c.output.f)
	}
	if c.has&hasCost != 0 {
		if len(t.costs) == 0 {
			t.costs = slices.Grow(t.costs, cap(t.latencies))
		}
		t.costs = append(t.costs, c.cost)
	}
	for _, tc := range c.checks {
		t.tools.Total++
		if tc.passed {
			t.tools.Passed++
		}
	}
	countViolations(&t.violations, c.reported)
	if c.has&hasTrace != 0 {
		t.trace.Cases++
		t.trace.ExpectedSteps += int64(c.expected.f)
		t.trace.ObservedSteps += int64(c.observed.f)
	}
	if c.has&hasRepeatGroup != 0 {
		if len(t.groups) == 0 {
			t.groupNames.reset(cap(t.latencies), typicalGroupBytes)
			t.groups = slices.Grow(t.groups, cap(t.latencies))
		}
		g, added := t.groupNames.add(c.repeatGroup)
		if added {
			t.groups = append(t.groups, group{size: 1, status: c.status})
		} else {
			t.groups[g].size++
			t.groups[g].mixed = t.groups[g].mixed || t.groups[g].status != c.status
		}
	}
}

// Metrics aggregates the request (docs/design.md#4-metrics-rules). It
// reorders a copy of the latencies that r keeps for the next call, so
// calls on one Request must not run at the same time.
func (r *Request) Metrics() *api.Metrics {
	t := &r.tally
	n := len(t.latencies)
	m := &api.Metrics{
		SchemaVersion:      SchemaVersion,
		RunID:              string(r.runID),
		CaseCount:          n,
		TokensReported:     t.tokens,
		ToolChecks:         t.tools,
		BoundaryViolations: t.violations,
		TraceCompleteness:  t.trace,
		Integrity:          api.Integrity{Algorithm: "SHA-256", CanonicalSHA256: hex.EncodeToString(r.digest[:])},
	}
	m.Status.Counts = api.StatusCounts{
		Pass:    t.statuses[statusPass],
		Fail:    t.statuses[statusFail],
		Error:   t.statuses[statusError],
		Timeout: t.statuses[statusTimeout],
	}
	m.Status.PassRate = float64(m.Status.Counts.Pass) / float64(n)
	m.Status.FailureRate = float64(m.Status.Counts.Fail) / float64(n)
	m.Status.ErrorRate = float64(m.Status.Counts.Error) / float64(n)
	m.Status.TimeoutRate = float64(m.Status.Counts.Timeout) / float64(n)

	t.ranked = append(t.ranked[:0], t.latencies...)
	m.LatencyMS = latencyPercentiles(t.ranked)
	m.RepeatStability = t.repeatStability()
	m.TokensReported.Total = m.TokensReported.Input + m.TokensReported.Output
	if len(t.costs) > 0 {
		currency := string(r.costCurrency)
		m.CostReported = api.CostReported{Cases: len(t.costs), Currency: &currency, Total: decimalSum(t.costs)}
	}
	m.ToolChecks.Failed = m.ToolChecks.Total - m.ToolChecks.Passed
	m.ToolChecks.PassRate = ratio(int64(m.ToolChecks.Passed), int64(m.ToolChecks.Total))
	m.TraceCompleteness.CompletenessRate = ratio(m.TraceCompleteness.ObservedSteps, m.TraceCompleteness.ExpectedSteps)
	return m
}

// latencyPercentiles returns p50, p95 and max of latencies, which it
// reorders, by nearest rank (docs/design.md#4-metrics-rules): the value at 1-based rank
// ceil(p·n/100), always an observed value.
func latencyPercentiles(latencies []float64) api.LatencyMetrics {
	n := len(latencies)
	rank := func(p int) int { return (p*n + 99) / 100 }
	// Selecting p95 leaves the lower ranks before it, where p50 is found.
	p95 := selectRank(latencies, rank(95)-1)
	return api.LatencyMetrics{
		P50: selectRank(latencies[:rank(95)], rank(50)-1),
		P95: p95,
		Max: slices.Max(latencies[rank(95)-1:]),
	}
}

// selectRank reorders a so that a[k] is the value sorted order puts there,
// with no greater value before it and no smaller one after, and returns
// a[k]. It is quickselect with the median of three as pivot, falling back
// to a sort when partitions stay unbalanced, so that no input makes it
// quadratic.
func selectRank(a []float64, k int) float64 {
	lo, hi := 0, len(a) // a[k] is within a[lo:hi]
	for budget := 2 * bits.Len(uint(len(a))); hi-lo > 16; budget-- {
		if budget == 0 {
			slices.Sort(a[lo:hi])
			return a[k]
		}
		// Median of three to a[lo], as the pivot.
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi-1] < a[mid] {
			a[hi-1], a[mid] = a[mid], a[hi-1]
			if a[mid] < a[lo] {
				a[mid], a[lo] = a[lo], a[mid]
			}
		}
		a[lo], a[mid] = a[mid], a[lo]
		pivot := a[lo]
		// Hoare partition: a[lo+1:i] <= pivot <= a[j+1:hi].
		i, j := lo+1, hi-1
		for {
			for i <= j && a[i] < pivot {
				i++
			}
			for i <= j && a[j] > pivot {
				j--
			}
			if i >= j {
				break
			}
			a[i], a[j] = a[j], a[i]
			i++
			j--
		}
		a[lo], a[j] = a[j], a[lo] // the pivot to its place, j
		switch {
		case k < j:
			hi = j
		case k > j:
			lo = j + 1
		default:
			return a[k]
		}
	}
	slices.Sort(a[lo:hi])
	return a[k]
}

// add counts one case's codes, each distinct code once.
func countViolations(b *api.BoundaryViolations, reported []violation) {
	var set violation
	for _, v := range reported {
		set |= v
	}
	if set == 0 {
		return
	}
	b.CasesAffected++
	b.Total += bits.OnesCount8(uint8(set))
	for _, c := range []struct {
		code    violation
		counter *int
	}{
		{dataBoundary, &b.ByCode.DataBoundary},
		{instructionOverride, &b.ByCode.InstructionOverride},
		{policyBoundary, &b.ByCode.PolicyBoundary},
		{scopeEscape, &b.ByCode.ScopeEscape},
		{unauthorizedTool, &b.ByCode.UnauthorizedTool},
	} {
		if set&c.code != 0 {
			*c.counter++
		}
	}
}

// repeatStability: a repeat group of two or more cases is eligible, and
// stable when all its cases share one status.
func (t *tally) repeatStability() api.RepeatStability {
	var rs api.RepeatStability
	for _, g := range t.groups {
		if g.size < 2 {
			continue
		}
		rs.EligibleGroups++
		if !g.mixed {
			rs.StableGroups++
		}
	}
	rs.StabilityRate = ratio(int64(rs.StableGroups), int64(rs.EligibleGroups))
	return rs
}

// ratio is num/den, or nil when den is 0: a rate with no basis is null.
func ratio(num, den int64) *float64 {
	if den == 0 {
		return nil
	}
	v := float64(num) / float64(den)
	return &v
}
