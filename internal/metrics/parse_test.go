package metrics_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// TestErrors pins the code and field of refusals, and that the first
// offending place in document order is the one named.
func TestErrors(t *testing.T) {
	const ok = `{"case_id":"a","status":"pass","latency_ms":1}`
	tests := []struct {
		name  string
		body  string
		code  string
		field string
	}{
		{"bom", "\ufeff{}", api.CodeMalformedJSON, ""},
		{"empty", "", api.CodeMalformedJSON, ""},
		{"whitespace only", " \n", api.CodeMalformedJSON, ""},
		{"escaped duplicate name", `{"run_id":"r","\u0072un_id":"s","cases":[` + ok + `]}`, api.CodeMalformedJSON, ""},
		{"duplicate deep in unknown member", `{"run_id":"r","x":[{"y":{"a":1,"a":1}}],"cases":[` + ok + `]}`, api.CodeMalformedJSON, ""},
		{"duplicate of an early name among many", `{"run_id":"r","x":{` + members(12) + `,"m0":1},"cases":[` + ok + `]}`, api.CodeMalformedJSON, ""},
		{"duplicate of a late name among many", `{"run_id":"r","x":{` + members(12) + `,"m11":1},"cases":[` + ok + `]}`, api.CodeMalformedJSON, ""},
		{"many distinct names", `{"run_id":"r","x":{` + members(12) + `},"cases":[` + ok + `]}`, api.CodeUnknownField, "x"},
		{"duplicate in case", `{"run_id":"r","cases":[{"case_id":"a","case_id":"b","status":"pass","latency_ms":1}]}`, api.CodeMalformedJSON, ""},
		{"lone surrogate", `{"run_id":"\udc00","cases":[` + ok + `]}`, api.CodeMalformedJSON, ""},
		{"invalid utf-8", "{\"run_id\":\"\xc3\x28\",\"cases\":[" + ok + "]}", api.CodeMalformedJSON, ""},
		{"raw control character", "{\"run_id\":\"a\nb\",\"cases\":[" + ok + "]}", api.CodeMalformedJSON, ""},
		{"too deep", `{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, api.CodeMalformedJSON, ""},
		{"syntax error after schema error", `{"run_id":1,"cases":[` + ok + `],}`, api.CodeMalformedJSON, ""},
		{"not an object", `[]`, api.CodeInvalidField, ""},
		{"first in document order", `{"cases":[{"case_id":"a","status":"nope","latency_ms":-1}],"run_id":"-"}`, api.CodeInvalidField, "cases[0].status"},
		{"missing found at end of its object", `{"cases":[{"case_id":"a","latency_ms":1}],"run_id":"-"}`, api.CodeMissingField, "cases[0].status"},
		{"missing trace member", `{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"trace":{"observed_steps":1}}]}`, api.CodeMissingField, "cases[0].trace.expected_steps"},
		{"unknown names itself", `{"run_id":"r","cases":[` + ok + `,{"case_id":"b","status":"pass","latency_ms":1,"prompt":"hi"}]}`, api.CodeUnknownField, "cases[1].prompt"},
		{"unknown tool check member", `{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"tool_checks":[{"name":"t","passed":true},{"name":"u","passed":true,"api_key":"x"}]}]}`, api.CodeUnknownField, "cases[0].tool_checks[1].api_key"},
		{"cost without currency", `{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"cost":0}]}`, api.CodeMissingField, "cost_currency"},
		{"duplicate case_id names the later", `{"run_id":"r","cases":[` + ok + `,{"case_id":"b","status":"pass","latency_ms":1},` + ok + `]}`, api.CodeInvalidField, "cases[2].case_id"},
		{"boundary code not a string", `{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"boundary_violations":["scope_escape",7]}]}`, api.CodeInvalidField, "cases[0].boundary_violations[1]"},
		{"trace not an object", `{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"trace":[]}]}`, api.CodeInvalidField, "cases[0].trace"},
		{"501 cases", `{"run_id":"r","cases":[` + distinctCases(501) + `]}`, api.CodeInvalidField, "cases"},
		{"501st case invalid too", `{"run_id":"r","cases":[` + distinctCases(500) + `,{}]}`, api.CodeInvalidField, "cases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := metrics.Compute([]byte(tt.body))
			var merr *api.Error
			if !errors.As(err, &merr) {
				t.Fatalf("err = %v, want a *api.Error", err)
			}
			if merr.Code != tt.code || merr.Field != tt.field {
				t.Errorf("got code %q field %q (%s), want code %q field %q", merr.Code, merr.Field, merr.Message, tt.code, tt.field)
			}
			if merr.Field != "" && !strings.HasPrefix(merr.Message, merr.Field+" ") {
				t.Errorf("message %q does not start with the field", merr.Message)
			}
		})
	}
}

// TestResultIsDeterministic: the same request in another key order and
// spacing has the same digest and metrics.
func TestResultIsDeterministic(t *testing.T) {
	a := `{"run_id":"r","cost_currency":"EUR","cases":[{"case_id":"a","status":"pass","latency_ms":1.5,"cost":0.1,"boundary_violations":["scope_escape","scope_escape"]}]}`
	b := "{ \"cases\" : [ { \"boundary_violations\" : [\"scope_escape\",\"scope_escape\"], \"cost\": 1e-1, \"latency_ms\": 15E-1, \"status\": \"pass\", \"case_id\": \"\\u0061\" } ],\n\"cost_currency\":\"EUR\", \"run_id\":\"r\" }"
	ma, err := metrics.Compute([]byte(a))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := metrics.Compute([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ma, mb); diff != "" {
		t.Errorf("results differ (-compact +spaced):\n%s", diff)
	}
	if ma.BoundaryViolations.Total != 1 || ma.BoundaryViolations.ByCode.ScopeEscape != 1 {
		t.Errorf("duplicate codes within a case not counted once: %+v", ma.BoundaryViolations)
	}
}

func distinctCases(n int) string {
	cases := make([]string, n)
	for i := range cases {
		cases[i] = fmt.Sprintf(`{"case_id":"c%d","status":"pass","latency_ms":%d}`, i, i)
	}
	return strings.Join(cases, ",")
}

// members is n distinct members "m0":1,"m1":1,...
func members(n int) string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf(`"m%d":1`, i)
	}
	return strings.Join(ms, ",")
}
