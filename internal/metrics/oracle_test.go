package metrics_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// oracle decides what the engine must answer using libraries only:
// jsontext for I-JSON (400), the published JSON Schema (422), and the two
// rules JSON Schema cannot state (unique case_id, observed ≤ expected steps).
type oracle struct {
	schema *jsonschema.Schema
}

func newOracle(t testing.TB) *oracle {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.MetricsRequestSchema))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("metrics-request.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("metrics-request.schema.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	return &oracle{schema: s}
}

// status is the HTTP status the engine's verdict on body must map to.
func (o *oracle) status(body []byte) (int, string) {
	if !jsontext.Value(body).IsValid() {
		return http.StatusBadRequest, "not I-JSON"
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return http.StatusBadRequest, err.Error()
	}
	doc = asDoubles(doc)
	if err := o.schema.Validate(doc); err != nil {
		return http.StatusUnprocessableEntity, err.Error()
	}
	if why := unschemaRule(doc); why != "" {
		return http.StatusUnprocessableEntity, why
	}
	return http.StatusOK, ""
}

// asDoubles turns numbers into the doubles they denote (the data model of
// RFC 8785 and docs/design.md#4-metrics-rules). A literal too large for a double becomes
// ±MaxFloat64, outside every bound of the schema as the literal is: the
// validator's own big.Rat reading panics on exponents past a million.
func asDoubles(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = asDoubles(e)
		}
	case []any:
		for i, e := range v {
			v[i] = asDoubles(e)
		}
	case json.Number:
		f, _ := strconv.ParseFloat(string(v), 64)
		if math.IsInf(f, 0) {
			return math.Copysign(math.MaxFloat64, f)
		}
		return f
	}
	return v
}

// unschemaRule checks a schema-valid request, numbers as doubles, for the
// rules JSON Schema cannot express.
func unschemaRule(doc any) string {
	seen := map[string]bool{}
	for _, c := range doc.(map[string]any)["cases"].([]any) {
		c := c.(map[string]any)
		id := c["case_id"].(string)
		if seen[id] {
			return "duplicate case_id " + id
		}
		seen[id] = true
		if tr, ok := c["trace"].(map[string]any); ok {
			if tr["observed_steps"].(float64) > tr["expected_steps"].(float64) {
				return "observed_steps above expected_steps"
			}
		}
	}
	return ""
}

// engineStatus is the HTTP status of the engine's verdict.
func engineStatus(t testing.TB, body []byte) (int, *api.Metrics, error) {
	m, err := metrics.Compute(body)
	if err == nil {
		return http.StatusOK, m, nil
	}
	var merr *api.Error
	if !errors.As(err, &merr) {
		t.Fatalf("error is %T, not *api.Error: %v", err, err)
	}
	return merr.Status(), nil, err
}

// edgeCases are bodies at the borders of the rules, for the cross-check and
// as fuzz seeds.
func edgeCases() []string {
	const ok = `{"case_id":"a","status":"pass","latency_ms":1}`
	req := func(cases ...string) string {
		return `{"run_id":"r","cases":[` + strings.Join(cases, ",") + `]}`
	}
	withCase := func(members string) string {
		return req(`{"case_id":"a","status":"pass","latency_ms":1,` + members + `}`)
	}
	return []string{
		req(ok),
		"\ufeff" + req(ok),
		req(ok) + "\n\t ",
		req(ok, ok),
		req(`{"case_id":"a","status":"pass","latency_ms":1}`, `{"case_id":"\u0061","status":"pass","latency_ms":1}`),
		withCase(`"trace":{"expected_steps":1,"observed_steps":2}`),
		withCase(`"trace":{"expected_steps":2,"observed_steps":2.0}`),
		withCase(`"trace":{"observed_steps":0,"expected_steps":0}`),
		withCase(`"input_tokens":1.0000000000000000001`),
		withCase(`"input_tokens":1000000000`),
		withCase(`"input_tokens":1000000000.5`),
		withCase(`"input_tokens":1e9`),
		withCase(`"output_tokens":-0`),
		withCase(`"output_tokens":1e-400`),
		withCase(`"cost":1e-400`),
		withCase(`"cost":1e400`),
		withCase(`"cost":0.1`),
		`{"run_id":"r","cost_currency":"EUR","cases":[{"case_id":"a","status":"pass","latency_ms":1,"cost":1e-300},{"case_id":"b","status":"pass","latency_ms":1,"cost":1000000}]}`,
		`{"run_id":"r","cost_currency":"EUR","cases":[{"case_id":"a","status":"pass","latency_ms":1,"cost":0.30000000000000004},{"case_id":"b","status":"pass","latency_ms":1,"cost":123456.789012345678}]}`,
		req(`{"case_id":"a","status":"pass","latency_ms":86400000.0000000001}`),
		req(`{"case_id":"a","status":"pass","latency_ms":-0.0}`),
		req(`{"case_id":"a","status":"pass","latency_ms":5e-324}`),
		req(`{"case_id":"a","status":"pass","latency_ms":1E+2}`),
		req(`{"case_id":"a","status":"pass","latency_ms":01}`),
		req(`{"case_id":"a","status":"pass","latency_ms":1.}`),
		req(`{"case_id":"a","status":"pass","latency_ms":.5}`),
		req(`{"case_id":"a","status":"pass","latency_ms":+1}`),
		req(`{"case_id":"a","status":"pass","latency_ms":Infinity}`),
		`{"run_id":"r","\u0072un_id":"s","cases":[` + ok + `]}`,
		`{"run_id":"\ud800","cases":[` + ok + `]}`,
		`{"run_id":"\ud83d\ude00","cases":[` + ok + `]}`,
		"{\"run_id\":\"\xff\",\"cases\":[" + ok + "]}",
		"{\"run_id\":\"a\tb\",\"cases\":[" + ok + "]}",
		`{"run_id":"a\/b","cases":[` + ok + `]}`,
		`{"run_id":"\u0000","cases":[` + ok + `]}`,
		`{"run_id":"r","x":{"a":1,"a":2},"cases":[` + ok + `]}`,
		`{"run_id":"r","x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `,"cases":[` + ok + `]}`,
		`{"run_id":"r","x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `,"cases":[` + ok + `]}`,
		`{"run_id":"r","cases":[` + ok + `],"cost_currency":null}`,
		`{"run_id":"r","cases":[` + ok + `],"cost_currency":"EUR"}`,
		`{"run_id":"` + strings.Repeat("r", 128) + `","cases":[` + ok + `]}`,
		`{"run_id":"` + strings.Repeat("é", 10) + `","cases":[` + ok + `]}`,
		withCase(`"tool_checks":[{"name":"` + strings.Repeat("t", 80) + `","passed":false}]`),
		withCase(`"tool_checks":[{"passed":true,"name":"x"},{"name":"y","passed":null}]`),
		withCase(`"boundary_violations":["scope_escape","scope_escape","data_boundary"]`),
		withCase(`"boundary_violations":[]`),
		withCase(`"repeat_group":"g"`),
		req(`{"case_id":"a","status":"pass","latency_ms":1,"repeat_group":"g"}`, `{"case_id":"b","status":"fail","latency_ms":2,"repeat_group":"g"}`),
		`{"run_id":"r","cases":[` + ok + `]`,
		`{"run_id":"r","cases":[` + ok + `],}`,
		`{"run_id":"r","cases":[` + ok + `,]}`,
		`{"run_id":"r" "cases":[]}`,
		`{"run_id":'r',"cases":[]}`,
		`"just a string"`,
		`null`,
		`42`,
		`{}`,
		` `,
	}
}

// corpus is every body the cross-check runs: the vectors, the edge cases,
// the published examples and the committed fuzz corpus.
func corpus(t testing.TB) map[string][]byte {
	t.Helper()
	bodies := map[string][]byte{}
	for _, v := range loadVectors(t) {
		bodies["vector/"+v.Name] = []byte(v.Body)
	}
	for i, s := range edgeCases() {
		bodies["edge/"+strconv.Itoa(i)] = []byte(s)
	}
	examples, err := filepath.Glob("../../api/examples/*.json")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples under api/examples: %v", err)
	}
	for _, f := range examples {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies["example/"+filepath.Base(f)] = body
	}
	files, err := filepath.Glob("testdata/fuzz/FuzzCompute/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		bodies["fuzz/"+filepath.Base(f)] = readFuzzFile(t, f)
	}
	return bodies
}

// readFuzzFile reads a corpus file of 'go test fuzz v1' holding one []byte.
func readFuzzFile(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header, value, _ := strings.Cut(string(raw), "\n")
	value = strings.TrimSpace(value)
	if header != "go test fuzz v1" || !strings.HasPrefix(value, "[]byte(") || !strings.HasSuffix(value, ")") {
		t.Fatalf("%s: not a 'go test fuzz v1' file with one []byte", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(value, "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// TestSchemaAgreesWithEngine runs every body of the corpus through the
// engine and the oracle; they must agree on 200, 400 and 422.
func TestSchemaAgreesWithEngine(t *testing.T) {
	o := newOracle(t)
	counts := map[int]int{}
	for name, body := range corpus(t) {
		want, why := o.status(body)
		got, _, err := engineStatus(t, body)
		counts[got]++
		if got != want {
			t.Errorf("%s: engine says %d (%v), oracle says %d (%s)", name, got, err, want, why)
		}
	}
	// Guard against a corpus that quietly lost one kind of verdict.
	for _, status := range []int{http.StatusOK, http.StatusBadRequest, http.StatusUnprocessableEntity} {
		if counts[status] < 5 {
			t.Errorf("only %d bodies with status %d in the corpus", counts[status], status)
		}
	}
	t.Logf("agreed on %d bodies: %v", len(corpus(t)), counts)
}
