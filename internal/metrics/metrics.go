// Package metrics is evalmeter's metrics engine. It reads a metrics request
// strictly (spec §2.5, DESIGN.md §3), writes it in canonical form (RFC 8785),
// hashes that and aggregates the metrics of spec §2.6 with the rules of
// DESIGN.md §2.
//
// The engine is pure: no I/O, no clock, no global state. The same body always
// gives the same metrics or the same error.
package metrics

import (
	"crypto/sha256"
	"encoding/hex"
	"math/bits"
	"slices"
)

// SchemaVersion is the schema_version of the schema document and the result.
const SchemaVersion = "1.0"

// Metrics is the metrics result (spec §2.6). A nil pointer is a rate with
// no basis and marshals as null.
type Metrics struct {
	SchemaVersion      string             `json:"schema_version"`
	RunID              string             `json:"run_id"`
	CaseCount          int                `json:"case_count"`
	Status             StatusMetrics      `json:"status"`
	LatencyMS          LatencyMetrics     `json:"latency_ms"`
	RepeatStability    RepeatStability    `json:"repeat_stability"`
	TokensReported     TokensReported     `json:"tokens_reported"`
	CostReported       CostReported       `json:"cost_reported"`
	ToolChecks         ToolChecks         `json:"tool_checks"`
	BoundaryViolations BoundaryViolations `json:"boundary_violations"`
	TraceCompleteness  TraceCompleteness  `json:"trace_completeness"`
	Integrity          Integrity          `json:"integrity"`
	ReportIncluded     bool               `json:"report_included"`
}

type StatusMetrics struct {
	Counts      StatusCounts `json:"counts"`
	PassRate    float64      `json:"pass_rate"`
	FailureRate float64      `json:"failure_rate"`
	ErrorRate   float64      `json:"error_rate"`
	TimeoutRate float64      `json:"timeout_rate"`
}

type StatusCounts struct {
	Pass    int `json:"pass"`
	Fail    int `json:"fail"`
	Error   int `json:"error"`
	Timeout int `json:"timeout"`
}

type LatencyMetrics struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max"`
}

type RepeatStability struct {
	EligibleGroups int      `json:"eligible_groups"`
	StableGroups   int      `json:"stable_groups"`
	StabilityRate  *float64 `json:"stability_rate"`
}

type TokensReported struct {
	Cases  int   `json:"cases"`
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Total  int64 `json:"total"`
}

type CostReported struct {
	Cases    int     `json:"cases"`
	Currency *string `json:"currency"`
	Total    float64 `json:"total"`
}

type ToolChecks struct {
	Total    int      `json:"total"`
	Passed   int      `json:"passed"`
	Failed   int      `json:"failed"`
	PassRate *float64 `json:"pass_rate"`
}

type BoundaryViolations struct {
	Total         int          `json:"total"`
	CasesAffected int          `json:"cases_affected"`
	ByCode        ViolationsBy `json:"by_code"`
}

type ViolationsBy struct {
	DataBoundary        int `json:"data_boundary"`
	InstructionOverride int `json:"instruction_override"`
	PolicyBoundary      int `json:"policy_boundary"`
	ScopeEscape         int `json:"scope_escape"`
	UnauthorizedTool    int `json:"unauthorized_tool"`
}

type TraceCompleteness struct {
	Cases            int      `json:"cases"`
	ExpectedSteps    int64    `json:"expected_steps"`
	ObservedSteps    int64    `json:"observed_steps"`
	CompletenessRate *float64 `json:"completeness_rate"`
}

type Integrity struct {
	Algorithm       string `json:"algorithm"`
	CanonicalSHA256 string `json:"canonical_sha256"`
}

// Compute parses and validates body and returns its metrics. Errors are
// *Error values.
func Compute(body []byte) (*Metrics, error) {
	r, err := Parse(body)
	if err != nil {
		return nil, err
	}
	return r.Metrics(), nil
}

// Digest is the SHA-256 of the request's canonical form.
func (r *Request) Digest() [sha256.Size]byte {
	h := sha256.New()
	write := func(b []byte) { h.Write(b) }
	write(r.appendCanonical(make([]byte, 0, 16<<10), write))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Metrics aggregates the request (DESIGN.md §2).
func (r *Request) Metrics() *Metrics {
	n := len(r.cases)
	digest := r.Digest()
	m := &Metrics{
		SchemaVersion: SchemaVersion,
		RunID:         string(r.runID),
		CaseCount:     n,
		Integrity:     Integrity{Algorithm: "SHA-256", CanonicalSHA256: hex.EncodeToString(digest[:])},
	}

	latencies := make([]float64, n)
	costs := make([]number, 0, n)
	for i := range r.cases {
		c := &r.cases[i]
		latencies[i] = c.latency.f
		switch c.status {
		case statusPass:
			m.Status.Counts.Pass++
		case statusFail:
			m.Status.Counts.Fail++
		case statusError:
			m.Status.Counts.Error++
		case statusTimeout:
			m.Status.Counts.Timeout++
		}
		if c.has&(hasInput|hasOutput) != 0 {
			m.TokensReported.Cases++
			m.TokensReported.Input += c.input
			m.TokensReported.Output += c.output
		}
		if c.has&hasCost != 0 {
			costs = append(costs, c.cost)
		}
		for _, tc := range r.toolChecks[c.checks.start : c.checks.start+c.checks.n] {
			m.ToolChecks.Total++
			if tc.passed {
				m.ToolChecks.Passed++
			}
		}
		m.BoundaryViolations.add(r.violations[c.reported.start : c.reported.start+c.reported.n])
		if c.has&hasTrace != 0 {
			m.TraceCompleteness.Cases++
			m.TraceCompleteness.ExpectedSteps += c.expected
			m.TraceCompleteness.ObservedSteps += c.observed
		}
	}

	counts := m.Status.Counts
	m.Status.PassRate = float64(counts.Pass) / float64(n)
	m.Status.FailureRate = float64(counts.Fail) / float64(n)
	m.Status.ErrorRate = float64(counts.Error) / float64(n)
	m.Status.TimeoutRate = float64(counts.Timeout) / float64(n)

	slices.Sort(latencies)
	m.LatencyMS = LatencyMetrics{P50: nearestRank(latencies, 50), P95: nearestRank(latencies, 95), Max: latencies[n-1]}

	m.RepeatStability = r.repeatStability()

	m.TokensReported.Total = m.TokensReported.Input + m.TokensReported.Output

	if len(costs) > 0 {
		currency := string(r.costCurrency)
		m.CostReported = CostReported{Cases: len(costs), Currency: &currency, Total: decimalSum(costs)}
	}

	m.ToolChecks.Failed = m.ToolChecks.Total - m.ToolChecks.Passed
	m.ToolChecks.PassRate = ratio(int64(m.ToolChecks.Passed), int64(m.ToolChecks.Total))
	m.TraceCompleteness.CompletenessRate = ratio(m.TraceCompleteness.ObservedSteps, m.TraceCompleteness.ExpectedSteps)
	return m
}

// nearestRank is the p-th percentile of sorted values: the value at 1-based
// rank ceil(p·n/100), always an observed value.
func nearestRank(sorted []float64, p int) float64 {
	rank := (p*len(sorted) + 99) / 100
	return sorted[rank-1]
}

// add counts one case's codes, each distinct code once.
func (b *BoundaryViolations) add(reported []violation) {
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

// repeatStability groups cases by repeat_group: a group of two or more cases
// is eligible, and stable when all its cases share one status.
func (r *Request) repeatStability() RepeatStability {
	type group struct {
		size   int
		status status
		mixed  bool
	}
	names := newByteSet(len(r.cases))
	groups := make([]group, 0, len(r.cases))
	for i := range r.cases {
		c := &r.cases[i]
		if c.has&hasRepeatGroup == 0 {
			continue
		}
		g, added := names.add(c.repeatGroup)
		if added {
			groups = append(groups, group{size: 1, status: c.status})
			continue
		}
		groups[g].size++
		groups[g].mixed = groups[g].mixed || groups[g].status != c.status
	}
	var rs RepeatStability
	for _, g := range groups {
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
