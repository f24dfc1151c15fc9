package convert

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// secretMarker is planted in every free-text field of the privacy fixtures
// (prompts, outputs, messages, explanations, metadata, test output, paths).
// It must never reach a request, a warning or an error message.
const secretMarker = "SECRETMARKER"

// convertOK converts paths as format and checks that the request is one the
// service accepts: the metrics engine computes it.
func convertOK(t *testing.T, format string, paths ...string) *Result {
	t.Helper()
	res, err := Convert(paths, Options{Format: format})
	if err != nil {
		t.Fatalf("Convert(%s, %v): %v", format, paths, err)
	}
	checkValid(t, res)
	return res
}

// checkValid fails the test when the engine refuses the request, or when
// the request is not in its canonical form.
func checkValid(t testing.TB, res *Result) {
	t.Helper()
	body, err := res.Request.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := metrics.Canonical(body)
	if err != nil {
		t.Fatalf("the engine refuses the converted request: %v\n%s", err, body)
	}
	if !bytes.Equal(canonical, body) {
		t.Fatalf("the converted request is not in canonical form:\n%s\nwant\n%s", body, canonical)
	}
}

// checkPrivate converts paths and fails when the marker appears in the
// request, a warning or an error.
func checkPrivate(t *testing.T, format string, paths ...string) {
	t.Helper()
	res, err := Convert(paths, Options{Format: format})
	var out string
	if err != nil {
		out = err.Error()
	} else {
		body, _ := res.Request.Marshal()
		out = string(body) + strings.Join(res.Warnings, "\n")
	}
	if strings.Contains(strings.ToUpper(out), secretMarker) {
		t.Errorf("the marker of free text leaks from %v:\n%s", paths, out)
	}
}

// fuzzFiles is the body of a format's fuzz target: seeded with the files at
// paths, it converts each input as format from a file whose name ends in ext.
func fuzzFiles(f *testing.F, format, ext string, paths []string) {
	f.Helper()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzConvert(t, format, ext, data)
	})
}

// jsonFixtures lists every JSON file under dir, at any depth; it fails t when
// there is none.
func jsonFixtures(t testing.TB, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures under %s: %v", dir, err)
	}
	return paths
}

// tempFile writes data to a file named name in a new temporary directory of
// the test's and returns its path.
func tempFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// byID indexes a request's cases by case_id.
func byID(req Request) map[string]Case {
	m := make(map[string]Case, len(req.Cases))
	for _, c := range req.Cases {
		m[c.ID] = c
	}
	return m
}

// fuzzConvert is the body of every format's fuzz target: whatever the input,
// no panic, and a request that converts is one the engine accepts.
func fuzzConvert(t *testing.T, format, ext string, data []byte) {
	path := tempFile(t, "results"+ext, data)
	res, err := Convert([]string{path}, Options{Format: format})
	if err != nil {
		var wrong *WrongFormatError
		var unusable *UnusableError
		if errors.As(err, &wrong) || errors.As(err, &unusable) || strings.HasPrefix(err.Error(), path) {
			return
		}
		t.Fatalf("an error that does not name the file: %v", err)
	}
	if len(res.Request.Cases) > MaxCases {
		t.Fatalf("%d cases converted without Split", len(res.Request.Cases))
	}
	checkValid(t, res)
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func ptrEq[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// checkConversion converts paths as format with opts and compares the cases
// and the warnings with the expected ones.
func checkConversion(t *testing.T, format string, paths []string, opts Options, want []Case, warnings []string) *Result {
	t.Helper()
	opts.Format = format
	res, err := Convert(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, res)
	if diff := cmp.Diff(want, res.Request.Cases, cmpopts.EquateEmpty(), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(warnings, res.Warnings, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	return res
}
