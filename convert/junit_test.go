package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func junitPath(name string) string { return filepath.Join("testdata", "junit", name) }

func TestJUnit(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		want     []Case
		warnings []string
	}{{
		// Setup and teardown errors, pytest-timeout, skip and xfail.
		name: "pytest",
		path: junitPath("pytest.xml"),
		want: []Case{
			{ID: "evals.test_answers.test_capital-france-", Status: Pass, LatencyMS: 120},
			{ID: "evals.test_answers.test_capital-peru-", Status: Fail, LatencyMS: 1005},
			{ID: "evals.test_answers.test_long_answer", Status: Timeout, LatencyMS: 5000},
			{ID: "evals.test_answers.test_needs_api", Status: Error, LatencyMS: 2},
			// A failure in the call and an error in teardown: error.
			{ID: "evals.test_answers.test_cleanup", Status: Error, LatencyMS: 310},
			{ID: "test_module_level", Status: Pass, LatencyMS: 250},
			{ID: "evals.test_tools.test_tool_call", Status: Error, LatencyMS: 500},
		},
		warnings: []string{
			"2 ids rewritten to fit A-Z a-z 0-9 . _ : - and 128 characters",
			"2 skipped cases dropped",
		},
	}, {
		// Failures without message or type: their text is not searched.
		name: "jest-junit",
		path: junitPath("jest.xml"),
		want: []Case{
			{ID: "agent-answers-greets-the-user.agent-answers-greets-the-user", Status: Pass, LatencyMS: 12},
			{ID: "agent-answers-refuses-unsafe-requests.agent-answers-refuses-unsafe-requests", Status: Fail, LatencyMS: 1250},
			{ID: "agent-answers-waits-for-the-tool.agent-answers-waits-for-the-tool", Status: Fail, LatencyMS: 5001},
			{ID: "agent-answers-plain.agent-answers-plain", Status: Pass, LatencyMS: 300},
			{ID: "Test-suite-failed-to-run.src-broken.test.js", Status: Error},
		},
		warnings: []string{
			"5 ids rewritten to fit A-Z a-z 0-9 . _ : - and 128 characters",
			"1 skipped cases dropped",
		},
	}, {
		// Root testsuite, grouped time, reruns. A JUnit 4 TestTimedOutException
		// says "timed out", not "timeout": a failure.
		name: "surefire",
		path: junitPath("surefire.xml"),
		want: []Case{
			{ID: "com.example.EvalTest.longRun", Status: Pass, LatencyMS: 1234500},
			{ID: "com.example.EvalTest.flakyThenPass", Status: Pass, LatencyMS: 750},
			{ID: "com.example.EvalTest.alwaysFails", Status: Fail, LatencyMS: 200},
			{ID: "com.example.EvalTest.slowCall", Status: Timeout, LatencyMS: 10001},
			{ID: "com.example.EvalTest.brokenSetup", Status: Error, LatencyMS: 3},
			{ID: "com.example.EvalTest.oldJUnit4Timeout", Status: Fail, LatencyMS: 100},
		},
		warnings: []string{
			"1 cases failed and then passed on a rerun (flaky); sent as pass",
			"1 skipped cases dropped",
		},
	}, {
		name: "nested suites and odd times",
		path: junitPath("nested.xml"),
		want: []Case{
			// Control characters in the output, raw and as references.
			{ID: "deep.case", Status: Pass, LatencyMS: 250},
			{ID: "mid.no_time", Status: Pass},
			{ID: "outer.empty_time", Status: Pass},
			{ID: "outer.decimal_comma", Status: Pass, LatencyMS: 500},
			{ID: "outer.bad_time", Status: Pass},
			{ID: "outer.nan_time", Status: Pass},
			{ID: "outer.negative", Status: Pass},
			{ID: "outer.type_timeout", Status: Timeout, LatencyMS: 2000},
			{ID: "outer.second_failure_timeout", Status: Timeout, LatencyMS: 3000},
			{ID: "outer.type_timeout:2", Status: Pass, LatencyMS: 4000},
			{ID: "outer-thing-x.", Status: Pass},
			{ID: "12", Status: Pass, LatencyMS: 1},
		},
		warnings: []string{
			"4 cases report no latency; sent as 0 ms",
			"2 cases report a negative or non-finite latency; sent as 0 ms",
			"1 skipped cases dropped",
			"1 ids rewritten to fit A-Z a-z 0-9 . _ : - and 128 characters",
			"1 cases have no id; named by their position",
			"1 duplicate case ids got a suffix :2, :3, ... in file order",
		},
	}, {
		name: "US-ASCII declared",
		path: junitPath("ascii.xml"),
		want: []Case{
			{ID: "org.example.AsciiTest.one", Status: Pass, LatencyMS: 10},
			{ID: "org.example.AsciiTest.two", Status: Fail, LatencyMS: 20},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := checkConversion(t, "junit", []string{tt.path}, Options{}, tt.want, tt.warnings)
			if !strings.HasPrefix(res.Request.RunID, "junit-") {
				t.Errorf("run id %q, want one derived from the cases", res.Request.RunID)
			}
		})
	}
}

func TestJUnitSeveralFiles(t *testing.T) {
	res := convertOK(t, "junit", junitPath("ascii.xml"), junitPath("ascii.xml"))
	ids := []string{}
	for _, c := range res.Request.Cases {
		ids = append(ids, c.ID)
	}
	want := []string{"org.example.AsciiTest.one", "org.example.AsciiTest.two", "org.example.AsciiTest.one:2", "org.example.AsciiTest.two:2"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

func TestParseJUnitTime(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.123", 0.123, true},
		{" 2 ", 2, true},
		{"1,234.5", 1234.5, true},
		{"1,234,567.125", 1234567.125, true},
		{"1,234", 1234, true},
		{"0,5", 0.5, true},
		{"12,75", 12.75, true},
		{"1e3", 1000, true},
		{"", 0, false},
		{"1,2,3", 0, false},
		{"abc", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseJUnitTime(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseJUnitTime(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestJUnitRefused(t *testing.T) {
	tests := []struct {
		name  string
		path  string
		looks string // "" for none
	}{
		{"another XML root", junitPath("not_junit.xml"), ""},
		{"a SWE-bench run report", filepath.Join("testdata", "swebench", "org__agent-v1.eval-2025-03.json"), "swebench"},
		{"a directory", junitPath(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]string{tt.path}, Options{Format: "junit"})
			var wrong *WrongFormatError
			if !errors.As(err, &wrong) {
				t.Fatalf("got %v, want a WrongFormatError", err)
			}
			if wrong.Format != "junit" || wrong.Looks != tt.looks {
				t.Errorf("got %+v, want Looks %q", wrong, tt.looks)
			}
		})
	}

	// A JUnit file given as a JSON format is recognised as JUnit.
	for _, format := range []string{"swebench", "promptfoo", "inspect", "tau2", "deepeval", "lmeval", "otel"} {
		_, err := Convert([]string{junitPath("pytest.xml")}, Options{Format: format})
		if err != nil && strings.Contains(err.Error(), "not implemented") {
			continue
		}
		var wrong *WrongFormatError
		if !errors.As(err, &wrong) || wrong.Looks != "junit" {
			t.Errorf("as %s: got %v, want a WrongFormatError that looks like junit", format, err)
		}
	}
}

func TestJUnitMalformed(t *testing.T) {
	tests := []struct {
		name string
		path string
		want string
	}{
		{"mismatched tags", junitPath("malformed.xml"), "malformed XML on line 6"},
		{"truncated", junitPath("truncated.xml"), "the file is truncated"},
		// encoding/xml expands no declared entity: a bomb is a syntax error.
		{"entity bomb", junitPath("entity_bomb.xml"), "malformed XML on line 18"},
		{"latin-1", junitPath("latin1.xml"), "save it as UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := Convert([]string{tt.path}, Options{Format: "junit"})
			if err == nil {
				t.Fatal("no error")
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tt.path+": ") || !strings.Contains(msg, tt.want) {
				t.Errorf("got %q, want %q after the path", msg, tt.want)
			}
			if strings.Contains(strings.ToUpper(msg), secretMarker) {
				t.Errorf("the error quotes the file: %q", msg)
			}
		})
	}
}

func TestJUnitDetect(t *testing.T) {
	// Not ascii.xml: Detect reads UTF-8 only.
	for _, name := range []string{"pytest.xml", "jest.xml", "surefire.xml", "nested.xml"} {
		path := junitPath(name)
		if got, err := Detect(path); err != nil || got != "junit" {
			t.Errorf("Detect(%s) = %q, %v; want junit", name, got, err)
		}
		res, err := Convert([]string{path}, Options{})
		if err != nil || res.Format != "junit" {
			t.Errorf("Convert(%s) auto: %v", name, err)
		}
	}
	if got, _ := Detect(junitPath("not_junit.xml")); got != "" {
		t.Errorf("Detect(not_junit.xml) = %q, want none", got)
	}
}

func TestJUnitPrivate(t *testing.T) {
	entries, err := os.ReadDir(junitPath(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		checkPrivate(t, "junit", junitPath(e.Name()))
		checkPrivate(t, "", junitPath(e.Name()))
	}
}

func FuzzJUnit(f *testing.F) {
	paths, err := filepath.Glob(junitPath("*"))
	if err != nil {
		f.Fatal(err)
	}
	fuzzFiles(f, "junit", ".xml", paths)
}
