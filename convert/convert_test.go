package convert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFitID(t *testing.T) {
	long := strings.Repeat("a", 200)
	tests := []struct {
		raw, suffix, want string
		changed           bool
	}{
		{"tests.test_api::test_login[user-1]", "", "tests.test_api::test_login-user-1-", true},
		{"django__django-11099", "", "django__django-11099", false},
		{"_private", "", "c_private", true},
		{"-x", "", "c-x", true},
		{"ünïcödé", "", "c-n-c-d-", true},
		{"42", ":e2", "42:e2", false},
		{long, "", long[:128], true},
		{long, ":t10", long[:124] + ":t10", true},
	}
	for _, tt := range tests {
		got, changed := fitID(tt.raw, tt.suffix, maxIDLen)
		if got != tt.want || changed != tt.changed {
			t.Errorf("fitID(%q, %q) = %q, %v; want %q, %v", tt.raw, tt.suffix, got, changed, tt.want, tt.changed)
		}
	}
	// A leading non-alphanumeric character after rewriting gets the prefix.
	if got, _ := fitID("ünï", "", maxIDLen); got != "c-n-" {
		t.Errorf("fitID of a leading rewritten character = %q", got)
	}
}

func TestSinkFinish(t *testing.T) {
	s := newSink()
	for _, id := range []string{"a", "a", "a:2", "a", "b"} {
		s.add(Case{ID: s.caseID(id, ""), Status: Pass})
	}
	s.finish(nil)
	var got []string
	for _, c := range s.cases {
		got = append(got, c.ID)
	}
	// "a:2" is taken by a case of its own, so the second duplicate is a:3.
	if want := "a a:3 a:2 a:4 b"; strings.Join(got, " ") != want {
		t.Errorf("ids %v, want %s", got, want)
	}
	if w := s.warnings(); len(w) != 1 || w[0] != "2 duplicate case ids got a suffix :2, :3, ... in file order" {
		t.Errorf("warnings %q", w)
	}

	h := newSink()
	h.add(Case{ID: "test_login", RepeatGroup: "test_login", Status: Pass})
	h.add(Case{ID: "test_login", RepeatGroup: "test_login", Status: Fail})
	h.finish([]byte("0123456789abcdef"))
	a, b := h.cases[0], h.cases[1]
	if len(a.ID) != 32 || strings.Contains(a.ID, "login") || a.RepeatGroup != a.ID || b.ID != a.ID+":2" || b.RepeatGroup != a.RepeatGroup {
		t.Errorf("hashed: %+v %+v", a, b)
	}
	if other := hashID([]byte("another key 0123"), "test_login"); other == a.ID {
		t.Error("the hash does not depend on the key")
	}
}

func TestSinkBounds(t *testing.T) {
	s := newSink()
	checks := make([]ToolCheck, 40)
	for i := range checks {
		checks[i] = s.check("c", true)
	}
	s.add(Case{ID: "x", Status: Pass, LatencyMS: -5, Cost: f64(-1), InputTokens: i64(2_000_000_000), ToolChecks: checks,
		Trace: &Trace{ExpectedSteps: 3, ObservedSteps: 5}})
	c := s.cases[0]
	if c.LatencyMS != 0 || c.Cost != nil || *c.InputTokens != maxTokens || len(c.ToolChecks) != 32 || c.Trace.ObservedSteps != 3 {
		t.Errorf("bounded case %+v", c)
	}
	want := []string{
		"1 cases report a negative or non-finite latency; sent as 0 ms",
		"1 token counts are above 1000000000; sent as 1000000000",
		"1 costs are negative or non-finite; left out",
		"8 tool checks dropped: a case keeps its first 32",
		"1 traces observed more steps than expected; observed sent as expected",
	}
	if got := s.warnings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDetectDirectoriesAndEncodings(t *testing.T) {
	tests := map[string]string{
		"testdata/swebench/run_evaluation":                            "swebench",
		"testdata/swebench/run_evaluation/eval-2025-03/org__agent-v1": "swebench",
		"testdata/tau2/dir_run":                                       "tau2",
		"testdata/junit/ascii.xml":                                    "junit",
		"testdata/inspect/nan.json":                                   "inspect",
		"testdata/deepeval":                                           "",
	}
	for path, want := range tests {
		if got, err := Detect(path); err != nil || got != want {
			t.Errorf("Detect(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
}

// A metrics request is recognised, so that submit can post it as it is, and
// Convert refuses it with a message that says so, whether asked to detect
// or told another format.
func TestMetricsRequest(t *testing.T) {
	dir := t.TempDir()
	request := filepath.Join(dir, "request.json")
	// An unknown member still makes a request: the engine names it.
	if err := os.WriteFile(request, []byte(`{"cases":[{"case_id":"a","status":"pass"}],"run_id":"r1","typo":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Detect(request); err != nil || got != FormatRequest {
		t.Errorf("Detect = %q, %v; want %q", got, err, FormatRequest)
	}
	if got, err := Detect("../api/examples/metrics-request.json"); err != nil || got != FormatRequest {
		t.Errorf("Detect of the bundled example = %q, %v; want %q", got, err, FormatRequest)
	}
	tests := []struct {
		paths  []string
		format string
		want   string
	}{
		{[]string{request}, "auto", "is a metrics request already, not a tool's results: nothing to convert"},
		{[]string{request}, FormatRequest, "is a metrics request already"},
		{[]string{request}, "junit", "not junit results; it is a metrics request (evalmeter submit posts it as it is, without --from)"},
		{[]string{request, request}, "auto", "is a metrics request: submit it on its own"},
	}
	for _, tt := range tests {
		_, err := Convert(tt.paths, Options{Format: tt.format})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Convert(%d files, --from %s): %v; want an error containing %q", len(tt.paths), tt.format, err, tt.want)
		}
	}
}
