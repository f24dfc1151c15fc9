package api

// The metrics result: the "metrics" member of MetricsEnvelope. The rules
// that compute each figure are in docs/design.md#37-metrics-result.

// Metrics is the metrics result (docs/design.md#37-metrics-result). A nil pointer is a rate with
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
