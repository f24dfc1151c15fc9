package convert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func deepEvalPath(name string) string { return filepath.Join("testdata", "deepeval", name) }

func TestDeepEval(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		want     []Case
		warnings []string
	}{{
		// testRunData, testCases then conversationalTestCases.
		name: "latest test run",
		path: deepEvalPath("latest_test_run.json"),
		want: []Case{{
			ID: "test_refund_policy", Status: Pass, LatencyMS: 1250, Cost: f64(0.0042),
			ToolChecks: []ToolCheck{{"Answer-Relevancy", true}, {"Faithfulness", true}},
		}, {
			ID: "test_shipping_time", Status: Fail, LatencyMS: 800, Cost: f64(0),
			ToolChecks: []ToolCheck{{"Answer-Relevancy", true}, {"Correctness--GEval-", false}},
		}, {
			ID: "test_warranty", Status: Error,
			ToolChecks: []ToolCheck{{"Faithfulness", false}, {"Answer-Relevancy", true}},
		}, {
			// An empty error is an error.
			ID: "test_empty_error", Status: Error, LatencyMS: 2000,
			ToolChecks: []ToolCheck{{"Bias", true}},
		}, {
			ID: "conversation_booking", Status: Pass,
			ToolChecks: []ToolCheck{{"Conversation-Completeness", true}, {"Knowledge-Retention", true}},
		}, {
			ID: "conversation_cancel", Status: Fail,
			ToolChecks: []ToolCheck{{"Role-Adherence", false}},
		}},
		warnings: []string{
			"7 tool check names rewritten to fit A-Z a-z 0-9 . _ : - and 80 characters",
			"3 cases report no latency; sent as 0 ms",
		},
	}, {
		// The TestRun itself, with a trace.
		name: "latest run full",
		path: deepEvalPath("latest_run_full.json"),
		want: []Case{{
			ID: "golden_7", Status: Pass, LatencyMS: 4500, Cost: f64(0.015),
			ToolChecks: []ToolCheck{{"Tool-Correctness", true}, {"Task-Completion", true}},
		}, {
			ID: "golden_8", Status: Fail, LatencyMS: 3000,
			ToolChecks: []ToolCheck{{"Task-Completion", false}},
		}},
		warnings: []string{"3 tool check names rewritten to fit A-Z a-z 0-9 . _ : - and 80 characters"},
	}, {
		// deepeval 0.21: metricsMetadata, named by metric; a case without a name.
		name: "results folder of 0.21",
		path: deepEvalPath("results_folder_v0_21.json"),
		want: []Case{{
			ID: "test_case_0", Status: Pass,
			ToolChecks: []ToolCheck{{"Contextual-Relevancy", true}},
		}, {
			ID: "2", Status: Error,
			ToolChecks: []ToolCheck{{"Hallucination", false}},
		}},
		warnings: []string{
			"1 tool check names rewritten to fit A-Z a-z 0-9 . _ : - and 80 characters",
			"2 cases report no latency; sent as 0 ms",
			"1 cases have no id; named by their position",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := checkConversion(t, "deepeval", []string{tt.path}, Options{}, tt.want, tt.warnings)
			for _, c := range res.Request.Cases {
				if c.InputTokens != nil || c.OutputTokens != nil {
					t.Errorf("%s: tokens sent; DeepEval's are the judge's", c.ID)
				}
			}
		})
	}
}

func TestDeepEvalEdges(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []Case
	}{{
		// File order of the members decides the order of the cases.
		name: "conversational cases first",
		doc: `{"conversationalTestCases": [{"name": "c", "success": true, "metricsData": []}],
			"testCases": [{"name": "t", "success": true, "completionTime": 1}], "metricsScores": []}`,
		want: []Case{
			{ID: "c", Status: Pass},
			{ID: "t", Status: Pass, LatencyMS: 1000},
		},
	}, {
		name: "odd values read as absent",
		doc: `{"testRunData": {"testCases": [
			{"name": "a", "success": "true", "completionTime": "1", "tokenCost": null,
			 "metricsData": [{"name": 3, "success": null, "error": null}, 7]},
			{"name": "b", "success": true, "metricsData": null, "completionTime": -1, "tokenCost": -2},
			{"name": "c", "success": true, "metricsData": [{"metric": "Old", "name": "New", "success": true, "error": false}]},
			null]}}`,
		want: []Case{
			{ID: "a", Status: Fail, ToolChecks: []ToolCheck{{"check", false}}},
			{ID: "b", Status: Pass},
			{ID: "c", Status: Error, ToolChecks: []ToolCheck{{"New", true}}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tempFile(t, "run.json", []byte(tt.doc))
			res := convertOK(t, "deepeval", path)
			if diff := cmp.Diff(tt.want, res.Request.Cases); diff != "" {
				t.Errorf("cases (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeepEvalDetect(t *testing.T) {
	for _, p := range deepEvalFixtures(t) {
		if strings.HasSuffix(p, "truncated.json") {
			continue
		}
		if got, err := Detect(p); err != nil || got != "deepeval" {
			t.Errorf("Detect(%s) = %q, %v; want deepeval", p, got, err)
		}
		if strings.HasSuffix(p, "link_only.json") {
			continue
		}
		res, err := Convert([]string{p}, Options{})
		if err != nil {
			t.Errorf("Convert(%s, auto): %v", p, err)
			continue
		}
		if res.Format != "deepeval" {
			t.Errorf("Convert(%s, auto) read it as %s", p, res.Format)
		}
	}
}

func TestDeepEvalRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name  string
		path  string
		check func(t *testing.T, err error)
	}{{
		name: "link only", path: deepEvalPath("link_only.json"),
		check: func(t *testing.T, err error) {
			wantUnusable(t, err)
			if err != nil && !strings.Contains(err.Error(), ".latest_run_full.json") {
				t.Errorf("the hint does not say where the local results are: %v", err)
			}
		},
	}, {
		name: "tau2 file", path: tau2Path("results.json"), check: wantWrongFormat("tau2"),
	}, {
		name: "not JSON", path: write("run.txt", "log SECRETMARKER"), check: wantWrongFormat(""),
	}, {
		name: "JSON of another shape", path: write("other.json", `{"cases": [{"name": "SECRETMARKER"}]}`), check: wantWrongFormat(""),
	}, {
		name: "no case", path: write("empty.json", `{"testCases": [], "conversationalTestCases": [], "metricsScores": []}`), check: wantUnusable,
	}, {
		name: "truncated", path: deepEvalPath("truncated.json"), check: wantNamesPath(deepEvalPath("truncated.json")),
	}, {
		name: "malformed", path: write("bad.json", `{"testCases": [{"name": "SECRETMARKER", "input": "SECRETMARKER" "x"}]}`),
		check: wantNamesPath(filepath.Join(dir, "bad.json")),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]string{tt.path}, Options{Format: "deepeval"})
			tt.check(t, err)
			if err != nil && strings.Contains(err.Error(), secretMarker) {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}

func TestDeepEvalPrivate(t *testing.T) {
	for _, p := range deepEvalFixtures(t) {
		checkPrivate(t, "deepeval", p)
	}
}

// deepEvalFixtures lists the files of testdata/deepeval.
func deepEvalFixtures(t testing.TB) []string {
	paths, err := filepath.Glob(deepEvalPath("*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no deepeval fixtures: %v", err)
	}
	return paths
}

func FuzzDeepEval(f *testing.F) {
	fuzzFiles(f, "deepeval", ".json", deepEvalFixtures(f))
}
