package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func promptfooPath(name string) string { return filepath.Join("testdata", "promptfoo", name) }

// promptfooFixtures are the fixtures that convert.
var promptfooFixtures = []string{"v1.json", "v1_wrapped.json", "v2.json", "v3.json", "v3_second.json", "manychecks.json"}

const (
	pfPass    = "9b1e4c07-5a2d-4f3e-8c61-0d7a2b9e4f11"
	pfAssert  = "2c8f6d13-9e4a-4b70-a2d5-7f1c3e8b6a22"
	pfTimeout = "5d3a7e20-1b6c-4e8f-9a03-2e6b4c1d7f33"
	pfError   = "7e4b9f31-2c7d-4a90-b1e4-3f7c5d2e8a44"
	pfSecond  = "0a9d8c7b-6e5f-4a3b-9c2d-1e0f9a8b7c55"
)

// v3Cases are the cases of v3.json.
var v3Cases = []Case{{
	// success with an error left over is a pass; the assertions' tokens are not counted.
	ID: pfPass, Status: Pass, LatencyMS: 812,
	InputTokens: i64(120), OutputTokens: i64(30), Cost: f64(0.00042),
	ToolChecks: []ToolCheck{{"llm-rubric", true}, {"contains", true}},
}, {
	// failureReason 1 with an error text and a grading result; a tokenUsage
	// with only a total reports no tokens, and an assert-set's own
	// components are not checks.
	ID: pfAssert, Status: Fail, LatencyMS: 1530, Cost: f64(0),
	ToolChecks: []ToolCheck{{"not-contains", false}, {"tone", true}, {"assert-set", false}},
}, {
	// failureReason 2 that timed out; counts that are all 0 are promptfoo's
	// default, not a report.
	ID: pfTimeout, Status: Timeout, LatencyMS: 30001,
}, {
	// failureReason 2 with a grading result is still an error; tokens from the response.
	ID: pfError, Status: Error, LatencyMS: 211,
	InputTokens: i64(40), OutputTokens: i64(0),
}, {
	// no id: testIdx and promptIdx.
	ID: "t2-p1", Status: Fail, LatencyMS: 455.5,
	InputTokens: i64(70), OutputTokens: i64(9), Cost: f64(0.0013),
	ToolChecks: []ToolCheck{{"javascript", false}},
}, {
	// neither id nor indexes: the position; an error without grading result.
	ID: "6", Status: Error, LatencyMS: 3,
}}

func TestPromptfoo(t *testing.T) {
	tests := []struct {
		name     string
		paths    []string
		runID    string // "derived" for one derived from the cases
		currency string
		want     []Case
		warnings []string
	}{{
		name:     "version 3",
		paths:    []string{promptfooPath("v3.json")},
		runID:    "eval-Xk2-2025-06-01T10:00:00",
		currency: "USD",
		want:     v3Cases,
		warnings: []string{"1 cases have no id; named by their position"},
	}, {
		name:     "version 2 with a table",
		paths:    []string{promptfooPath("v2.json")},
		runID:    "eval-2024-03-14T09:12:44",
		currency: "USD",
		want: []Case{{
			ID: "t0-p0", Status: Pass, LatencyMS: 1200,
			InputTokens: i64(50), OutputTokens: i64(10), Cost: f64(0.002),
			ToolChecks: []ToolCheck{{"icontains", true}},
		}, {
			// no failureReason yet: an error with a grading result is a failure.
			ID: "t0-p1", Status: Fail, LatencyMS: 2400,
			InputTokens: i64(55), OutputTokens: i64(15), Cost: f64(0.011),
			ToolChecks: []ToolCheck{{"equals", false}},
		}, {
			ID: "t1-p0", Status: Error, LatencyMS: 95,
		}, {
			// gradingResult null; "Timed Out" in any case.
			ID: "t1-p1", Status: Timeout, LatencyMS: 60000,
		}},
	}, {
		name:  "version 1",
		paths: []string{promptfooPath("v1.json")},
		runID: "derived",
		want: []Case{{
			ID: "1", Status: Pass, LatencyMS: 900, InputTokens: i64(20), OutputTokens: i64(5),
			ToolChecks: []ToolCheck{{"icontains", true}},
		}, {
			ID: "2", Status: Fail, LatencyMS: 1100, InputTokens: i64(24), OutputTokens: i64(7),
			ToolChecks: []ToolCheck{{"similar", false}},
		}, {
			// an error and no gradingResult (nor failureReason, which version 1 lacks).
			ID: "3", Status: Error, LatencyMS: 12,
		}, {
			ID: "4", Status: Timeout, LatencyMS: 10000,
		}},
		warnings: []string{"4 cases have no id; named by their position"},
	}, {
		name:  "version 1 wrapped, before evalId",
		paths: []string{promptfooPath("v1_wrapped.json")},
		runID: "derived",
		want: []Case{{
			ID: "1", Status: Pass, LatencyMS: 640, InputTokens: i64(10), OutputTokens: i64(2),
		}},
		warnings: []string{"1 cases have no id; named by their position"},
	}, {
		name:  "more than 32 checks",
		paths: []string{promptfooPath("manychecks.json")},
		runID: "eval-Mc4-2025-06-03T12:00:00",
		want: []Case{{
			ID: "c0ffee00-0000-4000-8000-000000000034", Status: Fail, LatencyMS: 42,
			ToolChecks: manyChecks(),
		}},
		warnings: []string{"2 tool checks dropped: a case keeps its first 32"},
	}, {
		// Two runs: the ids that collide get :2, and the run id is derived.
		name:     "two files",
		paths:    []string{promptfooPath("v3.json"), promptfooPath("v3_second.json")},
		runID:    "derived",
		currency: "USD",
		want: append(append([]Case(nil), v3Cases...), Case{
			ID: pfPass + ":2", Status: Fail, LatencyMS: 640,
			InputTokens: i64(118), OutputTokens: i64(33), Cost: f64(0.0004),
		}, Case{
			ID: pfSecond, Status: Pass, LatencyMS: 700,
			InputTokens: i64(121), OutputTokens: i64(28), Cost: f64(0.0005),
		}),
		warnings: []string{
			"1 cases have no id; named by their position",
			"1 files name different runs; the run id is derived from the cases (set --run-id)",
			"1 duplicate case ids got a suffix :2, :3, ... in file order",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := checkConversion(t, "promptfoo", tt.paths, Options{}, tt.want, tt.warnings)
			switch got := res.Request.RunID; {
			case tt.runID == "derived" && !strings.HasPrefix(got, "promptfoo-"):
				t.Errorf("run id %q, want one derived from the cases", got)
			case tt.runID != "derived" && got != tt.runID:
				t.Errorf("run id %q, want %q", got, tt.runID)
			}
			if res.Request.CostCurrency != tt.currency {
				t.Errorf("cost currency %q, want %q", res.Request.CostCurrency, tt.currency)
			}
		})
	}
}

// manyChecks are the 32 checks kept of manychecks.json's 34.
func manyChecks() []ToolCheck {
	types := []string{
		"contains", "icontains", "equals", "regex", "starts-with", "is-json", "contains-json", "javascript",
		"python", "llm-rubric", "similar", "levenshtein", "rouge-n", "bleu", "latency", "cost",
		"word-count", "is-refusal", "factuality", "g-eval", "moderation", "perplexity", "webhook", "classifier",
		"contains-any", "contains-all", "icontains-any", "icontains-all", "is-xml", "is-sql", "finish-reason", "not-contains",
	}
	checks := make([]ToolCheck, len(types))
	for i, typ := range types {
		checks[i] = ToolCheck{typ, i%3 != 2}
	}
	return checks
}

func TestPromptfooByID(t *testing.T) {
	res := convertOK(t, "promptfoo", promptfooPath("v3.json"))
	cases := byID(res.Request)
	if c := cases[pfTimeout]; c.Status != Timeout || c.InputTokens != nil || c.OutputTokens != nil || c.Cost != nil {
		t.Errorf("timed out case: %+v", c)
	}
	if c := cases[pfAssert]; !ptrEq(c.Cost, f64(0)) || c.InputTokens != nil || c.OutputTokens != nil {
		t.Errorf("a cost of 0 is reported, a total alone is no tokens: %+v", c)
	}
}

func TestPromptfooDetect(t *testing.T) {
	for _, name := range promptfooFixtures {
		t.Run(name, func(t *testing.T) {
			path := promptfooPath(name)
			got, err := Detect(path)
			if err != nil || got != "promptfoo" {
				t.Fatalf("Detect = %q, %v; want promptfoo", got, err)
			}
			res, err := Convert([]string{path}, Options{})
			if err != nil {
				t.Fatalf("Convert with the format detected: %v", err)
			}
			if res.Format != "promptfoo" {
				t.Errorf("format %q", res.Format)
			}
			checkValid(t, res)
		})
	}
}

// TestPromptfooRules covers rules on small documents of one result each.
func TestPromptfooRules(t *testing.T) {
	tests := []struct {
		name     string
		result   string
		want     Case
		warnings []string
	}{{
		name:   "early version 3 names testIdx testCaseIdx",
		result: `{"testCaseIdx": 4, "promptIdx": 0, "success": true, "latencyMs": 1}`,
		want:   Case{ID: "t4-p0", Status: Pass, LatencyMS: 1},
	}, {
		name:     "an index that is not an integer",
		result:   `{"testIdx": 1.5, "promptIdx": 0, "success": true, "latencyMs": 1}`,
		want:     Case{ID: "1", Status: Pass, LatencyMS: 1},
		warnings: []string{"1 cases have no id; named by their position"},
	}, {
		name:     "no latency",
		result:   `{"id": "a", "success": false}`,
		want:     Case{ID: "a", Status: Fail},
		warnings: []string{"1 cases report no latency; sent as 0 ms"},
	}, {
		name:   "an empty error is none",
		result: `{"id": "a", "success": false, "error": "", "latencyMs": 1}`,
		want:   Case{ID: "a", Status: Fail, LatencyMS: 1},
	}, {
		name:   "an error that is an object",
		result: `{"id": "a", "success": false, "error": {"message": "x"}, "latencyMs": 1}`,
		want:   Case{ID: "a", Status: Error, LatencyMS: 1},
	}, {
		name:   "failureReason 2 without an error text",
		result: `{"id": "a", "success": false, "failureReason": 2, "gradingResult": {"pass": false}, "latencyMs": 1}`,
		want:   Case{ID: "a", Status: Error, LatencyMS: 1},
	}, {
		name:   "failureReason 1 without a grading result",
		result: `{"id": "a", "success": false, "failureReason": 1, "error": "x", "latencyMs": 1}`,
		want:   Case{ID: "a", Status: Error, LatencyMS: 1},
	}, {
		name:   "a prompt count alone; the response's is not mixed in",
		result: `{"id": "a", "success": true, "latencyMs": 1, "tokenUsage": {"prompt": 7}, "response": {"tokenUsage": {"prompt": 9, "completion": 3}}}`,
		want:   Case{ID: "a", Status: Pass, LatencyMS: 1, InputTokens: i64(7)},
	}, {
		name:     "a negative count",
		result:   `{"id": "a", "success": true, "latencyMs": 1, "tokenUsage": {"prompt": -1, "completion": 2}}`,
		want:     Case{ID: "a", Status: Pass, LatencyMS: 1, OutputTokens: i64(2)},
		warnings: []string{"1 token counts are negative or not integers; left out"},
	}, {
		name:   "cost null",
		result: `{"id": "a", "success": true, "latencyMs": 1, "cost": null}`,
		want:   Case{ID: "a", Status: Pass, LatencyMS: 1},
	}, {
		name: "components without pass or assertion",
		result: `{"id": "a", "success": false, "latencyMs": 1, "gradingResult": {"pass": false, "componentResults": [
			{"score": 1}, {"pass": false, "assertion": null}, {"pass": true, "assertion": {"type": "equals", "metric": "exact"}}, null]}}`,
		want:     Case{ID: "a", Status: Fail, LatencyMS: 1, ToolChecks: []ToolCheck{{"check", false}, {"equals", true}}},
		warnings: []string{"1 tool checks have no name; named check"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"evalId": "eval-1", "results": {"version": 3, "results": [` + tt.result + `], "stats": {}}}`
			path := tempFile(t, "out.json", []byte(doc))
			checkConversion(t, "promptfoo", []string{path}, Options{}, []Case{tt.want}, tt.warnings)
		})
	}
}

func TestPromptfooLooks(t *testing.T) {
	tests := []struct {
		doc  string
		want bool
	}{
		{`{"evalId": "e", "results": {"version": 3, "results": [], "stats": {}}, "config": {}}`, true},
		{`{"evalId": null, "results": {"version": 2, "results": [], "table": {}}}`, true},
		{`{"results": {"version": 1, "results": []}, "config": {}, "shareableUrl": null}`, true},
		{`{"version": 3, "createdAt": "d", "results": {"results": [], "stats": {}}, "config": {}}`, true}, // promptfoo export
		{`{"version": 1, "results": [], "table": {}, "stats": {}}`, true},
		{`{"results": [], "table": {}}`, false},
		{`{"version": 1, "results": [], "stats": {}}`, false},
		{`{"results": {"version": 3, "results": []}}`, false},
		{`{"evalId": "e", "results": {"results": []}}`, false},
		{`{"version": 2, "eval": {"task": "t", "model": "m"}, "results": {"scores": []}, "stats": {}}`, false},
		{`{"version": 2, "results": {"results": []}, "table": {}, "stats": {}}`, false},
	}
	for _, tt := range tests {
		sh, err := readShape(strings.NewReader(tt.doc), "doc")
		if err != nil {
			t.Fatal(err)
		}
		if got := looksPromptfoo(sh); got != tt.want {
			t.Errorf("looksPromptfoo(%s) = %v, want %v", tt.doc, got, tt.want)
		}
	}
}

// TestPromptfooClaimsNoOther checks that a file another format knows, of
// our fixtures and the other formats', does not look like promptfoo too.
func TestPromptfooClaimsNoOther(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	others, _ := filepath.Glob(promptfooPath(filepath.Join("other", "*.json")))
	for _, p := range append(paths, others...) {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := readShape(f, p)
		f.Close()
		if err != nil {
			continue // not a whole JSON object
		}
		for _, format := range formats {
			if format.name != "promptfoo" && format.looks != nil && format.looks(sh) && looksPromptfoo(sh) {
				t.Errorf("%s looks like %s and like promptfoo", p, format.name)
			}
		}
	}
}

func TestPromptfooWrongFormat(t *testing.T) {
	tests := []struct {
		path, format, looks string
	}{
		{promptfooPath("other/tau2.json"), "promptfoo", "tau2"},
		{promptfooPath("other/inspect.json"), "promptfoo", "inspect"},
		{promptfooPath("other/deepeval.json"), "promptfoo", "deepeval"},
		{promptfooPath("other/junit.xml"), "promptfoo", "junit"},
		// a results list with nothing of a promptfoo summary beside it
		{promptfooPath("other/results_list.json"), "promptfoo", ""},
		{promptfooPath("v3.json"), "tau2", "promptfoo"},
		{promptfooPath("v1.json"), "tau2", "promptfoo"},
		{promptfooPath("v3.json"), "deepeval", "promptfoo"},
		{promptfooPath("v1.json"), "deepeval", "promptfoo"},
		{promptfooPath("v3.json"), "inspect", "promptfoo"},
		{promptfooPath("v2.json"), "inspect", "promptfoo"},
		{promptfooPath("v1.json"), "inspect", "promptfoo"},
	}
	for _, tt := range tests {
		t.Run(tt.format+" "+tt.path, func(t *testing.T) {
			_, err := Convert([]string{tt.path}, Options{Format: tt.format})
			var wrong *WrongFormatError
			if !errors.As(err, &wrong) {
				t.Fatalf("error %v, want a WrongFormatError", err)
			}
			if wrong.Looks != tt.looks || wrong.Format != tt.format || wrong.Path != tt.path {
				t.Errorf("got %+v, want it to look like %q", wrong, tt.looks)
			}
			if strings.Contains(err.Error(), secretMarker) {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}

func TestPromptfooMalformed(t *testing.T) {
	for _, name := range []string{"truncated.json", "malformed.json"} {
		t.Run(name, func(t *testing.T) {
			path := promptfooPath(name)
			_, err := Convert([]string{path}, Options{Format: "promptfoo"})
			if err == nil {
				t.Fatal("no error")
			}
			var wrong *WrongFormatError
			if errors.As(err, &wrong) {
				t.Fatalf("a malformed promptfoo file refused as another format: %v", err)
			}
			if !strings.HasPrefix(err.Error(), path+": ") {
				t.Errorf("the error does not start with the path: %v", err)
			}
			if strings.Contains(strings.ToUpper(err.Error()), secretMarker) {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}

func TestPromptfooEmpty(t *testing.T) {
	doc := `{"evalId": "eval-1", "results": {"version": 3, "results": [], "stats": {}}, "config": {}}`
	path := tempFile(t, "out.json", []byte(doc))
	_, err := Convert([]string{path}, Options{Format: "promptfoo"})
	var unusable *UnusableError
	if !errors.As(err, &unusable) {
		t.Fatalf("error %v, want an UnusableError", err)
	}
}

func TestPromptfooPrivate(t *testing.T) {
	names := append([]string{"truncated.json", "malformed.json"}, promptfooFixtures...)
	for _, name := range names {
		checkPrivate(t, "promptfoo", promptfooPath(name))
	}
	checkPrivate(t, "promptfoo", promptfooPath("v3.json"), promptfooPath("v3_second.json"))
	for _, name := range promptfooFixtures {
		b, err := os.ReadFile(promptfooPath(name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), secretMarker) {
			t.Errorf("%s plants no marker", name)
		}
	}
}

func FuzzPromptfoo(f *testing.F) {
	paths, _ := filepath.Glob(promptfooPath("*.json"))
	others, _ := filepath.Glob(promptfooPath(filepath.Join("other", "*")))
	fuzzFiles(f, "promptfoo", ".json", append(paths, others...))
}
