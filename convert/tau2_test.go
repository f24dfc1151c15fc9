package convert

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func tau2Path(name string) string { return filepath.Join("testdata", "tau2", name) }

func TestTau2(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		want     []Case
		warnings []string
	}{{
		name: "single file",
		path: tau2Path("results.json"),
		want: []Case{{
			ID: "1:t0", Status: Pass, LatencyMS: 12500, RepeatGroup: "1",
			InputTokens: i64(3200), OutputTokens: i64(92), Cost: f64(0.0123),
			ToolChecks: []ToolCheck{{"get_reservation_details", true}, {"cancel_reservation", true}},
			Trace:      &Trace{ExpectedSteps: 2, ObservedSteps: 2},
		}, {
			// 0.9999999999 is a full reward; the user's completion tokens are not the agent's.
			ID: "1:t1", Status: Pass, LatencyMS: 9250, RepeatGroup: "1",
			InputTokens: i64(1750), Cost: f64(0),
			ToolChecks: []ToolCheck{{"get_reservation_details", true}, {"cancel_reservation", false}},
			Trace:      &Trace{ExpectedSteps: 2, ObservedSteps: 1},
		}, {
			ID: "2:t0", Status: Fail, LatencyMS: 4000, InputTokens: i64(10), OutputTokens: i64(5),
		}, {
			ID: "3:t0", Status: Timeout, LatencyMS: 100000, Cost: f64(0.5),
		}, {
			ID: "4:t0", Status: Error, LatencyMS: 1500, InputTokens: i64(100), OutputTokens: i64(10), Cost: f64(0.02),
		}, {
			// No reward_info, no duration, a numeric task_id.
			ID: "5:t0", Status: Fail, Cost: f64(0.001),
		}},
		warnings: []string{"1 cases report no latency; sent as 0 ms"},
	}, {
		name: "termination reasons",
		path: tau2Path("reasons.json"),
		want: []Case{
			{ID: "r-agent-error:t0", Status: Error, LatencyMS: 2000},
			{ID: "r-user-error:t0", Status: Error, LatencyMS: 3000},
			{ID: "r-infra:t0", Status: Error, LatencyMS: 4000},
			{ID: "r-context:t0", Status: Error, LatencyMS: 5000},
			{ID: "r-unexpected:t0", Status: Error, LatencyMS: 6000},
			{ID: "r-timeout:t0", Status: Timeout, LatencyMS: 7000},
			{ID: "r-max-steps:t0", Status: Timeout, LatencyMS: 8000},
			{ID: "r-too-many:t0", Status: Error, LatencyMS: 9000},
			{ID: "r-user-stop:t0", Status: Pass, LatencyMS: 10000},
			{ID: "r-agent-stop:t0", Status: Fail, LatencyMS: 11000},
			// An unknown reason falls through to the reward.
			{ID: "r-future-reason:t0", Status: Pass, LatencyMS: 12000},
			{ID: "r-future-fail:t0", Status: Fail, LatencyMS: 13000},
		},
	}, {
		// Voice run: simulations/ in name order, ticks and agent_usage not read.
		name: "directory",
		path: tau2Path("dir_run"),
		want: tau2DirCases,
	}, {
		name: "results.json of a directory",
		path: tau2Path("dir_run/results.json"),
		want: tau2DirCases,
	}, {
		// A missing trial is the simulation's rank in its task.
		name: "directory with one results file",
		path: tau2Path("json_run"),
		want: []Case{{
			ID: "create_task_1:t0", Status: Pass, LatencyMS: 3750,
			InputTokens: i64(610), OutputTokens: i64(22), Cost: f64(0.0031),
			ToolChecks: []ToolCheck{{"create_task", true}},
			Trace:      &Trace{ExpectedSteps: 1, ObservedSteps: 1},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := checkConversion(t, "tau2", []string{tt.path}, Options{}, tt.want, tt.warnings)
			if res.Request.CostCurrency == "" && slices.ContainsFunc(tt.want, func(c Case) bool { return c.Cost != nil }) {
				t.Error("costs without a currency")
			}
		})
	}
}

var tau2DirCases = []Case{{
	ID: "mobile_data_issue:t1", Status: Timeout, LatencyMS: 600000, RepeatGroup: "mobile_data_issue",
	InputTokens: i64(2100), OutputTokens: i64(80),
}, {
	ID: "roaming_issue:t0", Status: Fail, LatencyMS: 95200,
	InputTokens: i64(400), OutputTokens: i64(12), Cost: f64(0.31),
}, {
	ID: "mobile_data_issue:t0", Status: Pass, LatencyMS: 120400, RepeatGroup: "mobile_data_issue",
	Cost:       f64(0.42),
	ToolChecks: []ToolCheck{{"toggle_airplane_mode", true}},
	Trace:      &Trace{ExpectedSteps: 1, ObservedSteps: 1},
}}

// TestTau2Edges covers what the fixtures of a real run do not.
func TestTau2Edges(t *testing.T) {
	sim := func(body string) string {
		return `{"info": {}, "tasks": [], "simulations": [` + body + `]}`
	}
	tests := []struct {
		name string
		doc  string
		want []Case
	}{{
		name: "trials missing and repeated",
		doc: sim(`{"task_id": "a", "duration": 1, "reward_info": {"reward": 1}},
			{"task_id": "a", "duration": 1, "reward_info": {"reward": 1}},
			{"task_id": "b", "duration": 1, "trial": 3, "reward_info": {"reward": 1}},
			{"task_id": "b", "duration": 1, "trial": 3, "reward_info": {"reward": 0}}`),
		want: []Case{
			{ID: "a:t0", Status: Pass, LatencyMS: 1000, RepeatGroup: "a"},
			{ID: "a:t1", Status: Pass, LatencyMS: 1000, RepeatGroup: "a"},
			{ID: "b:t3", Status: Pass, LatencyMS: 1000, RepeatGroup: "b"},
			{ID: "b:t3:2", Status: Fail, LatencyMS: 1000, RepeatGroup: "b"},
		},
	}, {
		name: "ids fitted, usage in any order, odd values read as absent",
		doc: sim(`{"usage": 1, "messages": [{"usage": {"completion_tokens": 7}, "role": "assistant"}, "x", null],
			"task_id": "task one/two", "trial": 1.5, "duration": "2", "agent_cost": "0.1",
			"reward_info": {"reward": "1", "action_checks": [{"action": {"name": ""}, "action_match": "yes"}, 5]}},
			{"task_id": null, "duration": 2, "trial": 0}, 7`),
		want: []Case{{
			ID: "task-one-two:t0", Status: Fail, OutputTokens: i64(7),
			ToolChecks: []ToolCheck{{"check", false}},
			Trace:      &Trace{ExpectedSteps: 1, ObservedSteps: 0},
		}, {
			ID: "2:t0", Status: Fail, LatencyMS: 2000,
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tempFile(t, "results.json", []byte(tt.doc))
			res := convertOK(t, "tau2", path)
			if diff := cmp.Diff(tt.want, res.Request.Cases); diff != "" {
				t.Errorf("cases (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTau2Detect(t *testing.T) {
	for _, p := range []string{"results.json", "reasons.json", "dir_run", "dir_run/results.json", "json_run"} {
		path := tau2Path(p)
		if got, err := Detect(path); err != nil || got != "tau2" {
			t.Errorf("Detect(%s) = %q, %v; want tau2", path, got, err)
		}
		res, err := Convert([]string{path}, Options{})
		if err != nil {
			t.Errorf("Convert(%s, auto): %v", path, err)
			continue
		}
		if res.Format != "tau2" {
			t.Errorf("Convert(%s, auto) read it as %s", path, res.Format)
		}
	}
}

func TestTau2Refusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	lonelyIndex := write("lonely/results.json", `{"info": {"policy": "SECRETMARKER"}, "tasks": [], "simulation_index": []}`)
	badSim := write("badsim/simulations/a.json", `["SECRETMARKER"]`)
	emptyDir := filepath.Join(dir, "empty")
	if err := os.Mkdir(emptyDir, 0o700); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		path   string
		format string
		check  func(t *testing.T, err error)
	}{{
		name: "deepeval file as tau2", path: filepath.Join("testdata", "deepeval", "latest_test_run.json"), format: "tau2",
		check: wantWrongFormat("deepeval"),
	}, {
		name: "tau2 file as deepeval", path: tau2Path("results.json"), format: "deepeval",
		check: wantWrongFormat("tau2"),
	}, {
		name: "tau2 directory as deepeval", path: tau2Path("dir_run"), format: "deepeval",
		check: wantWrongFormat("tau2"),
	}, {
		name: "a directory of nothing", path: emptyDir, format: "tau2",
		check: wantWrongFormat(""),
	}, {
		name: "not JSON", path: write("notes.txt", "notes SECRETMARKER"), format: "tau2",
		check: wantWrongFormat(""),
	}, {
		name: "JSON of another shape", path: write("other.json", `{"simulations": [{"task_id": "SECRETMARKER"}]}`), format: "tau2",
		check: wantWrongFormat(""),
	}, {
		name: "index without simulations", path: lonelyIndex, format: "tau2",
		check: wantUnusable,
	}, {
		name: "simulation that is not an object", path: filepath.Dir(filepath.Dir(badSim)), format: "tau2",
		check: wantUnusable,
	}, {
		name: "truncated", path: tau2Path("truncated.json"), format: "tau2",
		check: wantNamesPath(tau2Path("truncated.json")),
	}, {
		name: "truncated simulation file", path: filepath.Dir(filepath.Dir(write("cut/simulations/b.json", `{"task_id": "x", "messages": [{"content": "SECRETMARKER`))), format: "tau2",
		check: wantNamesPath(filepath.Join(dir, "cut", "simulations", "b.json")),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]string{tt.path}, Options{Format: tt.format})
			tt.check(t, err)
			if err != nil && strings.Contains(err.Error(), secretMarker) {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}

func wantWrongFormat(looks string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var wrong *WrongFormatError
		if !errors.As(err, &wrong) || wrong.Looks != looks {
			t.Errorf("got %v; want a WrongFormatError that says it looks like %q", err, looks)
		}
	}
}

func wantUnusable(t *testing.T, err error) {
	t.Helper()
	var unusable *UnusableError
	if !errors.As(err, &unusable) || unusable.Hint == "" {
		t.Errorf("got %v; want an UnusableError with a hint", err)
	}
}

func wantNamesPath(path string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("got %v; want an error that starts with %s", err, path)
		}
	}
}

func TestTau2Private(t *testing.T) {
	for _, p := range jsonFixtures(t, tau2Path("")) {
		checkPrivate(t, "tau2", p)
	}
	checkPrivate(t, "tau2", tau2Path("dir_run"))
	checkPrivate(t, "tau2", tau2Path("json_run"))
}

func FuzzTau2(f *testing.F) {
	fuzzFiles(f, "tau2", ".json", jsonFixtures(f, tau2Path("")))
}
