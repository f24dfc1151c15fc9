package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func swebenchPath(name string) string { return filepath.Join("testdata", "swebench", name) }

// swebenchDir is the instance reports of one run, as the harness leaves them.
var swebenchDir = swebenchPath("run_evaluation/eval-2025-03/org__agent-v1")

func TestSWEBench(t *testing.T) {
	tests := []struct {
		name     string
		paths    []string
		want     []Case
		warnings []string
	}{{
		// 2.0.10 to 4.x: schema_version 2. Lists in case order, each in file order.
		name:  "run report",
		paths: []string{swebenchPath("org__agent-v1.eval-2025-03.json")},
		want: []Case{
			{ID: "django__django-11099", Status: Pass},
			{ID: "astropy__astropy-12907", Status: Pass},
			{ID: "sympy__sympy-20590", Status: Fail},
			{ID: "django__django-11133", Status: Fail},
			{ID: "pytest-dev__pytest-5227", Status: Fail},
			{ID: "requests__requests-2317", Status: Error},
			{ID: "sympy__sympy-24152", Status: Error},
		},
		warnings: []string{
			"7 cases report no latency; sent as 0 ms",
			"1 instances never ran (incomplete); not counted",
		},
	}, {
		// 5.0: infra_failure_ids, also listed as unresolved or error, are errors;
		// ambiguous failures stay failures.
		name:  "run report with infrastructure failures",
		paths: []string{swebenchPath("org__agent-v2.infra-run.json")},
		want: []Case{
			{ID: "a__a-1", Status: Pass},
			{ID: "b__b-2", Status: Error},
			{ID: "c__c-3", Status: Fail},
			{ID: "d__d-4", Status: Fail},
			{ID: "e__e-5", Status: Error},
			{ID: "f__f-6", Status: Error},
		},
		warnings: []string{"6 cases report no latency; sent as 0 ms"},
	}, {
		// 2.0.0 to 2.0.2: no empty_patch_ids, no incomplete_ids.
		name:  "run report of 2.0.0",
		paths: []string{swebenchPath("gpt-4.1.v2-0.json")},
		want: []Case{
			{ID: "x__x-1", Status: Pass},
			{ID: "x__x-3", Status: Fail},
			{ID: "x__x-2", Status: Fail},
			{ID: "x__x-4", Status: Error},
		},
		warnings: []string{"4 cases report no latency; sent as 0 ms"},
	}, {
		// Before 2.0.0: no unresolved_ids; a completed id neither resolved nor in error is unresolved.
		name:  "run report before unresolved_ids",
		paths: []string{swebenchPath("prerelease.json")},
		want: []Case{
			{ID: "y__y-1", Status: Pass},
			{ID: "y__y-3", Status: Fail},
			{ID: "y__y-4", Status: Error},
			{ID: "y__y-2", Status: Error},
		},
		warnings: []string{"4 cases report no latency; sent as 0 ms"},
	}, {
		// The first list of resolved, unresolved, empty patch, error counts;
		// entries that are not strings are not ids.
		name:  "ids listed twice",
		paths: []string{swebenchPath("listed_twice.json")},
		want: []Case{
			{ID: "z__z-1", Status: Pass},
			{ID: "z__z-2", Status: Fail},
			{ID: "z__z-3", Status: Fail},
			{ID: "z__z-4", Status: Error},
		},
		warnings: []string{
			"4 cases report no latency; sent as 0 ms",
			"3 instance ids are listed more than once in the run report; each counted once, by its first list of resolved, unresolved, empty patch, error",
			"2 instances never ran (incomplete); not counted",
		},
	}, {
		// In name order; the empty report.json the Modal runner leaves is an error.
		name:  "directory of instance reports",
		paths: []string{swebenchDir},
		want:  swebenchDirCases,
		warnings: []string{
			"7 cases report no latency; sent as 0 ms",
		},
	}, {
		name:     "the run's directory",
		paths:    []string{swebenchPath("run_evaluation")},
		want:     swebenchDirCases,
		warnings: []string{"7 cases report no latency; sent as 0 ms"},
	}, {
		name: "instance report files",
		paths: []string{
			filepath.Join(swebenchDir, "sympy__sympy-20590", "report.json"),
			filepath.Join(swebenchDir, "astropy__astropy-12907", "report.json"),
			filepath.Join(swebenchDir, "django__django-11099", "report.json"),
		},
		want: []Case{
			{ID: "sympy__sympy-20590", Status: Fail},
			{ID: "astropy__astropy-12907", Status: Error},
			{ID: "django__django-11099", Status: Pass},
		},
		warnings: []string{"3 cases report no latency; sent as 0 ms"},
	}, {
		// An object without a boolean resolved is not an instance's report.
		name:  "instances in one file",
		paths: []string{swebenchPath("two_instances.json")},
		want: []Case{
			{ID: "matplotlib__matplotlib-23299", Status: Pass},
			{ID: "matplotlib__matplotlib-23476", Status: Error},
		},
		warnings: []string{"2 cases report no latency; sent as 0 ms"},
	}, {
		// Two runs of the same instances: the second run's ids get a suffix.
		name:  "two run reports",
		paths: []string{swebenchPath("gpt-4.1.v2-0.json"), swebenchPath("gpt-4.1.v2-0.json")},
		want: []Case{
			{ID: "x__x-1", Status: Pass},
			{ID: "x__x-3", Status: Fail},
			{ID: "x__x-2", Status: Fail},
			{ID: "x__x-4", Status: Error},
			{ID: "x__x-1:2", Status: Pass},
			{ID: "x__x-3:2", Status: Fail},
			{ID: "x__x-2:2", Status: Fail},
			{ID: "x__x-4:2", Status: Error},
		},
		warnings: []string{
			"8 cases report no latency; sent as 0 ms",
			"4 duplicate case ids got a suffix :2, :3, ... in file order",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := checkConversion(t, "swebench", tt.paths, Options{}, tt.want, tt.warnings)
			if !strings.HasPrefix(res.Request.RunID, "swebench-") {
				t.Errorf("run id %q, want one derived from the cases", res.Request.RunID)
			}
		})
	}
}

var swebenchDirCases = []Case{
	{ID: "astropy__astropy-12907", Status: Error}, // infra_failure
	{ID: "django__django-11099", Status: Pass},
	{ID: "psf__requests-863", Status: Pass},
	{ID: "pytest-dev__pytest-5227", Status: Fail}, // patch_is_None
	{ID: "requests__requests-2317", Status: Fail}, // an ambiguous failure
	{ID: "sympy__sympy-20590", Status: Fail},      // tests failed
	{ID: "sympy__sympy-24152", Status: Error},     // empty report.json
}

func TestSWEBenchRefused(t *testing.T) {
	wrong := []struct {
		name  string
		path  string
		looks string
	}{
		{"another JSON", swebenchPath("not_swebench.json"), ""},
		{"JUnit XML", junitPath("pytest.xml"), "junit"},
		{"a patch file", filepath.Join(swebenchDir, "django__django-11099", "patch.diff"), ""},
	}
	for _, tt := range wrong {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]string{tt.path}, Options{Format: "swebench"})
			var wf *WrongFormatError
			if !errors.As(err, &wf) || wf.Format != "swebench" || wf.Looks != tt.looks {
				t.Fatalf("got %v, want a WrongFormatError that looks like %q", err, tt.looks)
			}
		})
	}

	t.Run("directory without report.json", func(t *testing.T) {
		_, err := Convert([]string{t.TempDir()}, Options{Format: "swebench"})
		var wf *WrongFormatError
		if !errors.As(err, &wf) {
			t.Fatalf("got %v, want a WrongFormatError", err)
		}
	})

	t.Run("run report in a directory", func(t *testing.T) {
		_, err := Convert([]string{swebenchPath("mixed_dir")}, Options{Format: "swebench"})
		var u *UnusableError
		if !errors.As(err, &u) || !strings.Contains(u.Reason, filepath.Join("mixed_dir", "a__a-1", "report.json")) {
			t.Fatalf("got %v, want an UnusableError naming the file", err)
		}
	})

	t.Run("only incomplete instances", func(t *testing.T) {
		data := `{"completed_ids": [], "resolved_ids": [], "error_ids": [], "incomplete_ids": ["a__a-1"]}`
		path := tempFile(t, "m.run.json", []byte(data))
		_, err := Convert([]string{path}, Options{Format: "swebench"})
		var u *UnusableError
		if !errors.As(err, &u) {
			t.Fatalf("got %v, want an UnusableError", err)
		}
	})

	// A SWE-bench report given as another JSON format is recognised.
	for _, format := range []string{"promptfoo", "inspect", "tau2", "deepeval", "junit"} {
		_, err := Convert([]string{swebenchPath("org__agent-v2.infra-run.json")}, Options{Format: format})
		if err != nil && strings.Contains(err.Error(), "not implemented") {
			continue
		}
		var wf *WrongFormatError
		if !errors.As(err, &wf) || wf.Looks != "swebench" {
			t.Errorf("as %s: got %v, want a WrongFormatError that looks like swebench", format, err)
		}
	}
}

func TestSWEBenchMalformed(t *testing.T) {
	tests := []struct {
		name string
		path string
		want string
	}{
		// json.go names a truncation "malformed JSON at byte N" for now.
		{"truncated", swebenchPath("truncated.json"), "JSON"},
		{"bad syntax", swebenchPath("malformed.json"), "malformed JSON at byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]string{tt.path}, Options{Format: "swebench"})
			if err == nil {
				t.Fatal("no error")
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

func TestSWEBenchDetect(t *testing.T) {
	paths := []string{
		swebenchPath("org__agent-v1.eval-2025-03.json"),
		swebenchPath("org__agent-v2.infra-run.json"),
		swebenchPath("gpt-4.1.v2-0.json"),
		swebenchPath("prerelease.json"),
		swebenchPath("listed_twice.json"),
		swebenchPath("two_instances.json"),
	}
	for _, name := range []string{"astropy__astropy-12907", "django__django-11099", "psf__requests-863", "pytest-dev__pytest-5227", "requests__requests-2317", "sympy__sympy-20590"} {
		paths = append(paths, filepath.Join(swebenchDir, name, "report.json"))
	}
	for _, path := range paths {
		if got, err := Detect(path); err != nil || got != "swebench" {
			t.Errorf("Detect(%s) = %q, %v; want swebench", path, got, err)
		}
		res, err := Convert([]string{path}, Options{Format: "auto"})
		if err != nil || res.Format != "swebench" {
			t.Errorf("Convert(%s) auto: %v", path, err)
		}
	}
	if got, _ := Detect(swebenchPath("not_swebench.json")); got != "" {
		t.Errorf("Detect(not_swebench.json) = %q, want none", got)
	}
}

func TestSWEBenchPrivate(t *testing.T) {
	err := filepath.WalkDir(swebenchPath(""), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		checkPrivate(t, "swebench", path)
		if !d.IsDir() {
			checkPrivate(t, "", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func FuzzSWEBench(f *testing.F) {
	fuzzFiles(f, "swebench", ".json", jsonFixtures(f, swebenchPath("")))
}
