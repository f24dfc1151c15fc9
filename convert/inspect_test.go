package convert

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

const inspectDir = "testdata/inspect"

// inspectCase is what a test expects of one case.
type inspectCase struct {
	status  Status
	latency float64
	group   string
	in, out *int64
	cost    *float64
	checks  []ToolCheck
}

func ipass(name string) ToolCheck { return ToolCheck{Name: name, Passed: true} }
func ifail(name string) ToolCheck { return ToolCheck{Name: name, Passed: false} }

func TestInspect(t *testing.T) {
	tests := []struct {
		name     string
		path     string // a fixture, or a zip built by inspectZip
		runID    string
		ids      []string // in order
		cases    map[string]inspectCase
		warnings []string
	}{
		{
			name:  "v2 statuses, latency and usage",
			path:  filepath.Join(inspectDir, "v2.json"),
			runID: "Rk7vNq2XpT9mWc4LsZ8hJb",
			ids:   []string{"alpha", "2", "err-1", "time-1", "work-1", "tok-1", "nos-1", "msg-1"},
			cases: map[string]inspectCase{
				// results order (judge, match) decides, not the sample's.
				"alpha": {status: Pass, latency: 2500, in: i64(130), out: i64(20), cost: f64(0.0125),
					checks: []ToolCheck{ipass("judge"), ifail("match")}},
				// no total_time: working_time; no total_tokens: input + cache.
				"2": {status: Fail, latency: 1250, in: i64(65), out: i64(7),
					checks: []ToolCheck{ifail("judge"), ifail("match")}},
				"err-1":  {status: Error, latency: 750, checks: []ToolCheck{ipass("judge"), ipass("match")}},
				"time-1": {status: Timeout, latency: 60000, checks: []ToolCheck{ipass("judge"), ipass("match")}},
				"work-1": {status: Timeout, latency: 45250, checks: []ToolCheck{ifail("judge")}},
				// a token limit lets the score decide; two models summed.
				"tok-1": {status: Pass, latency: 3000, in: i64(500 + 250), out: i64(130), cost: f64(0.004),
					checks: []ToolCheck{ipass("judge"), ifail("match")}},
				"nos-1": {status: Error},
				// a reported cost of 0 and counts of 0 are reported.
				"msg-1": {status: Pass, latency: 250, in: i64(0), out: i64(0), cost: f64(0),
					checks: []ToolCheck{ipass("match")}},
			},
			warnings: []string{"1 cases report no latency; sent as 0 ms"},
		},
		{
			name:  "score values",
			path:  filepath.Join(inspectDir, "scores.json"),
			runID: "Sc0r3sRunA1",
			ids:   []string{"forms", "first-half", "dict-empty", "null"},
			cases: map[string]inspectCase{
				// one scorer per value form, checks in the results' order.
				"forms": {status: Pass, latency: 1000, checks: []ToolCheck{
					ipass("c"), ifail("i"), ifail("p"), ifail("n"), ipass("t"), ifail("f"),
					ifail("half"), ipass("one"), ipass("one-float"), ipass("three"), ifail("zero"),
					ifail("text"), ifail("list"), ipass("dict-pass"), ifail("dict-fail"),
				}},
				"first-half": {status: Fail, latency: 1000, checks: []ToolCheck{ifail("half"), ipass("one")}},
				// {} and null are no score: the next scorer decides.
				"dict-empty": {status: Pass, latency: 1000, checks: []ToolCheck{ipass("aux")}},
				"null":       {status: Fail, latency: 1000, checks: []ToolCheck{ifail("aux")}},
			},
		},
		{
			name:  "NaN and Infinity constants",
			path:  filepath.Join(inspectDir, "nan.json"),
			runID: "NaNrun",
			ids:   []string{"nan-first", "nan-leaf", "inf", "minus-inf", "all-nan"},
			cases: map[string]inspectCase{
				"nan-first": {status: Pass, latency: 2000, checks: []ToolCheck{ipass("aux")}},
				"nan-leaf":  {status: Pass, latency: 1000, checks: []ToolCheck{ipass("grade")}},
				"inf":       {status: Pass, latency: 1000, checks: []ToolCheck{ipass("grade")}},
				"minus-inf": {status: Fail, latency: 1000, checks: []ToolCheck{ifail("grade")}},
				"all-nan":   {status: Error, latency: 1000},
			},
		},
		{
			name:  "v1",
			path:  filepath.Join(inspectDir, "v1.json"),
			runID: "V1runQ8wE",
			ids:   []string{"1", "2", "3"},
			cases: map[string]inspectCase{
				"1": {status: Pass, checks: []ToolCheck{ipass("match")}},
				"2": {status: Fail, checks: []ToolCheck{ifail("match")}},
				"3": {status: Error},
			},
			warnings: []string{"3 cases report no latency; sent as 0 ms"},
		},
		{
			name:  "epochs seen in samples, cancelled run",
			path:  filepath.Join(inspectDir, "epochs.json"),
			runID: "Ep0chsRun",
			ids:   []string{"7:e1", "q:e1", "7:e2", "q:e2"},
			cases: map[string]inspectCase{
				"7:e1": {status: Pass, latency: 1000, group: "7", checks: []ToolCheck{ipass("match")}},
				"q:e1": {status: Fail, latency: 2000, group: "q", checks: []ToolCheck{ifail("match")}},
				"7:e2": {status: Fail, latency: 3000, group: "7", checks: []ToolCheck{ifail("match")}},
				"q:e2": {status: Pass, latency: 4000, group: "q", checks: []ToolCheck{ipass("match")}},
			},
			warnings: []string{"1 Inspect logs are of runs that did not finish with status success; the samples they hold are sent"},
		},
		{
			name:  "eval zip, deflate",
			path:  inspectZip(t, zip.Deflate, inspectFullZip),
			runID: "Ev4lZipRun",
			ids:   inspectZipIDs,
			cases: inspectZipCases,
		},
		{
			name:  "eval zip, zstd",
			path:  inspectZip(t, zipMethodZstd, inspectFullZip),
			runID: "Ev4lZipRun",
			ids:   inspectZipIDs,
			cases: inspectZipCases,
		},
		{
			name:  "eval zip without header.json",
			path:  inspectZip(t, zipMethodZstd, inspectRunningZip),
			runID: "Ev4lZipRun",
			// epochs from the journal's config: 2.
			ids: []string{"1:e1", "abc:e1"},
			cases: map[string]inspectCase{
				"1:e1":   inspectZipCases["1:e1"],
				"abc:e1": inspectZipCases["abc:e1"],
			},
			warnings: []string{"1 Inspect logs are of runs that did not finish with status success; the samples they hold are sent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := convertOK(t, "inspect", tt.path)
			if res.Request.RunID != tt.runID {
				t.Errorf("run id %q, want %q", res.Request.RunID, tt.runID)
			}
			var ids []string
			for _, c := range res.Request.Cases {
				ids = append(ids, c.ID)
			}
			if tt.ids != nil && !slices.Equal(ids, tt.ids) {
				t.Errorf("case ids %q, want %q", ids, tt.ids)
			}
			got := byID(res.Request)
			if len(got) != len(tt.cases) {
				t.Errorf("%d cases %q, want %d", len(got), ids, len(tt.cases))
			}
			for id, want := range tt.cases {
				c, ok := got[id]
				if !ok {
					t.Errorf("no case %q", id)
					continue
				}
				checkInspectCase(t, c, want)
			}
			if !slices.Equal(res.Warnings, tt.warnings) {
				t.Errorf("warnings %q, want %q", res.Warnings, tt.warnings)
			}
		})
	}
}

func checkInspectCase(t *testing.T, c Case, want inspectCase) {
	t.Helper()
	if c.Status != want.status {
		t.Errorf("%s: status %s, want %s", c.ID, c.Status, want.status)
	}
	if c.LatencyMS != want.latency {
		t.Errorf("%s: latency %v, want %v", c.ID, c.LatencyMS, want.latency)
	}
	if c.RepeatGroup != want.group {
		t.Errorf("%s: repeat group %q, want %q", c.ID, c.RepeatGroup, want.group)
	}
	if !ptrEq(c.InputTokens, want.in) || !ptrEq(c.OutputTokens, want.out) {
		t.Errorf("%s: tokens %s/%s, want %s/%s", c.ID, inspectShow(c.InputTokens), inspectShow(c.OutputTokens), inspectShow(want.in), inspectShow(want.out))
	}
	if !ptrEq(c.Cost, want.cost) {
		t.Errorf("%s: cost %s, want %s", c.ID, inspectShow(c.Cost), inspectShow(want.cost))
	}
	if !slices.Equal(c.ToolChecks, want.checks) {
		t.Errorf("%s: checks %v, want %v", c.ID, c.ToolChecks, want.checks)
	}
}

func inspectShow[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// inspectZipIDs is Inspect's order: by epoch, then id.
var inspectZipIDs = []string{"1:e1", "abc:e1", "1:e2", "abc:e2"}

var inspectZipCases = map[string]inspectCase{
	"1:e1": {status: Pass, latency: 1500, group: "1", in: i64(10), out: i64(5), cost: f64(0.001),
		checks: []ToolCheck{ipass("includes")}},
	"1:e2":   {status: Fail, latency: 2000, group: "1", checks: []ToolCheck{ifail("includes")}},
	"abc:e1": {status: Error, latency: 500, group: "abc"},
	// the re-run written last under the same name replaces the first.
	"abc:e2": {status: Pass, latency: 4000, group: "abc",
		checks: []ToolCheck{ipass("includes"), ifail("judge")}},
}

// Zip members as Inspect writes them: journal first, samples as they end,
// a re-run sample under the name of its first attempt, header.json last.
var (
	inspectFullZip = [][2]string{
		{"_journal/start.json", "_journal/start.json"},
		{"samples/abc_epoch_2.json", "samples/abc_epoch_2.json"},
		{"samples/1_epoch_2.json", "samples/1_epoch_2.json"},
		{"samples/abc_epoch_1.json", "samples/abc_epoch_1.json"},
		{"samples/1_epoch_1.json", "samples/1_epoch_1.json"},
		{"samples/abc_epoch_2.json", "rerun/abc_epoch_2.json"},
		{"summaries.json", "summaries.json"},
		{"reductions.json", "reductions.json"},
		{"header.json", "header.json"},
	}
	inspectRunningZip = [][2]string{
		{"_journal/start.json", "_journal/start.json"},
		{"samples/abc_epoch_1.json", "samples/abc_epoch_1.json"},
		{"samples/1_epoch_1.json", "samples/1_epoch_1.json"},
	}
)

// inspectZip writes an .eval log of members {name in the zip, file under
// testdata/inspect/eval} compressed with method, and returns its path.
func inspectZip(t testing.TB, method uint16, members [][2]string) string {
	t.Helper()
	data := inspectZipBytes(t, method, members)
	return tempFile(t, "log.eval", data)
}

func inspectZipBytes(t testing.TB, method uint16, members [][2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zipMethodZstd, func(w io.Writer) (io.WriteCloser, error) {
		return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
	})
	for _, m := range members {
		body, err := os.ReadFile(filepath.Join(inspectDir, "eval", m[1]))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m[0], Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func inspectFixtures(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(inspectDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	return paths
}

func TestInspectDetect(t *testing.T) {
	paths := []string{
		inspectZip(t, zip.Deflate, inspectFullZip),
		inspectZip(t, zipMethodZstd, inspectRunningZip),
	}
	for _, p := range inspectFixtures(t) {
		switch filepath.Base(p) {
		case "not_inspect.json":
		default:
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		if got, err := Detect(p); err != nil || got != "inspect" {
			t.Errorf("Detect(%s) = %q, %v; want inspect", p, got, err)
		}
		if filepath.Base(p) == "unscored.json" {
			continue
		}
		res, err := Convert([]string{p}, Options{})
		if err != nil {
			t.Errorf("Convert(%s) auto: %v", p, err)
			continue
		}
		if res.Format != "inspect" {
			t.Errorf("Convert(%s) auto: format %q", p, res.Format)
		}
	}
	if got, _ := Detect(filepath.Join(inspectDir, "not_inspect.json")); got == "inspect" {
		t.Errorf("Detect(not_inspect.json) = inspect")
	}
}

func TestInspectLooks(t *testing.T) {
	tests := []struct {
		doc  string
		want bool
	}{
		{`{"version": 2, "status": "success", "eval": {"run_id": "r", "task": "t", "model": "m"}, "samples": []}`, true},
		{`{"version": 2, "eval": {"task": "t", "model": "m"}}`, true}, // header.json
		{`{"status": "started", "eval": {"task": "t", "model": "m"}}`, true},
		{`{"version": 2, "eval": {"task": "t"}}`, false},
		{`{"eval": {"task": "t", "model": "m"}}`, false},
		{`{"version": 3, "results": {"results": []}, "config": {}}`, false},
		{`{"version": 2, "eval": "t"}`, false},
	}
	for _, tt := range tests {
		sh, err := readShape(strings.NewReader(tt.doc), "doc")
		if err != nil {
			t.Fatal(err)
		}
		if got := looksInspect(sh); got != tt.want {
			t.Errorf("looksInspect(%s) = %v, want %v", tt.doc, got, tt.want)
		}
	}
}

func TestInspectRefusals(t *testing.T) {
	t.Run("unscored", func(t *testing.T) {
		_, err := Convert([]string{filepath.Join(inspectDir, "unscored.json")}, Options{Format: "inspect"})
		var unusable *UnusableError
		if !errors.As(err, &unusable) || !strings.Contains(err.Error(), "inspect score") {
			t.Errorf("got %v, want an UnusableError saying to run inspect score", err)
		}
	})
	t.Run("wrong format", func(t *testing.T) {
		for _, p := range []string{
			filepath.Join(inspectDir, "not_inspect.json"),
			tempFile(t, "x.json", []byte(`[1, 2]`)),
			tempFile(t, "x.xml", []byte(`<testsuites/>`)),
			tempFile(t, "x.eval", inspectZipBytesNamed(t, "readme.txt")),
		} {
			_, err := Convert([]string{p}, Options{Format: "inspect"})
			var wrong *WrongFormatError
			if !errors.As(err, &wrong) {
				t.Errorf("%s: got %v, want a WrongFormatError", p, err)
			}
		}
	})
	t.Run("no sample", func(t *testing.T) {
		p := tempFile(t, "empty.json", []byte(`{"version": 2, "status": "success", "eval": {"run_id": "r", "task": "t", "model": "m"}, "samples": []}`))
		_, err := Convert([]string{p}, Options{Format: "inspect"})
		var unusable *UnusableError
		if !errors.As(err, &unusable) {
			t.Errorf("got %v, want an UnusableError", err)
		}
	})
}

// inspectZipBytesNamed is a zip that is not an Inspect log.
func inspectZipBytesNamed(t testing.TB, name string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create(name)
	io.WriteString(w, "notes "+secretMarker)
	zw.Close()
	return buf.Bytes()
}

// TestInspectMalformed checks that broken files give an error that names
// the file and quotes none of it.
func TestInspectMalformed(t *testing.T) {
	v2, err := os.ReadFile(filepath.Join(inspectDir, "v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(v2, []byte(`"samples": [`))
	cut += bytes.Index(v2[cut:], []byte(secretMarker)) + 3 // inside a message
	badSyntax := bytes.Replace(v2, []byte(`"epoch": 1,`), []byte(`"epoch": 1;`), 1)

	zipped := inspectZipBytes(t, zip.Deflate, inspectFullZip)
	corrupt := slices.Clone(zipped)
	at := bytes.Index(corrupt, []byte("samples/1_epoch_2.json")) + 200 // in its deflated body
	for i := at; i < at+64; i++ {
		corrupt[i] ^= 0x5a
	}
	zstdCorrupt := inspectZipBytes(t, zipMethodZstd, inspectFullZip)
	at = bytes.Index(zstdCorrupt, []byte("samples/1_epoch_2.json")) + 200
	for i := at; i < at+64; i++ {
		zstdCorrupt[i] ^= 0x5a
	}

	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"truncated.json", v2[:cut]},
		{"syntax.json", badSyntax},
		{"truncated.eval", zipped[:len(zipped)/2]},
		{"corrupt.eval", corrupt},
		{"corrupt-zstd.eval", zstdCorrupt},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tempFile(t, tt.name, tt.data)
			_, err := Convert([]string{p}, Options{Format: "inspect"})
			if err == nil {
				t.Fatal("no error")
			}
			var wrong *WrongFormatError
			if errors.As(err, &wrong) || !strings.HasPrefix(err.Error(), p) {
				t.Errorf("error %q does not start with the path", err)
			}
			if strings.Contains(strings.ToUpper(err.Error()), secretMarker) {
				t.Errorf("error quotes the file: %v", err)
			}
		})
	}
}

func TestInspectPrivate(t *testing.T) {
	for _, p := range inspectFixtures(t) {
		checkPrivate(t, "inspect", p)
	}
	checkPrivate(t, "inspect", inspectZip(t, zip.Deflate, inspectFullZip))
	checkPrivate(t, "inspect", inspectZip(t, zipMethodZstd, inspectRunningZip))
	// The fixtures do hold the marker.
	for _, p := range inspectFixtures(t) {
		if b, _ := os.ReadFile(p); !bytes.Contains(b, []byte(secretMarker)) {
			t.Errorf("%s holds no %s", p, secretMarker)
		}
	}
}

func FuzzInspect(f *testing.F) {
	fuzzFiles(f, "inspect", ".json", inspectFixtures(f))
}

func FuzzInspectEval(f *testing.F) {
	f.Add(inspectZipBytes(f, zip.Deflate, inspectFullZip))
	f.Add(inspectZipBytes(f, zip.Store, inspectRunningZip))
	f.Add(inspectZipBytes(f, zipMethodZstd, inspectRunningZip))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzConvert(t, "inspect", ".eval", data)
	})
}
