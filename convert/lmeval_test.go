package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func lmevalPath(name string) string { return filepath.Join("testdata", "lmeval", name) }

const lmevalDate = "_2025-01-15T10-20-30.123456"

func lmevalSamples(task string) string { return lmevalPath("samples_" + task + lmevalDate + ".jsonl") }

func TestLmeval(t *testing.T) {
	threshold := 0.5
	tests := []struct {
		name     string
		paths    []string
		opts     Options
		want     []Case
		warnings []string
	}{{
		// Multiple choice: acc, the first metric of the list, decides; acc_norm is not read.
		name:  "acc and acc_norm",
		paths: []string{lmevalSamples("hellaswag")},
		want: []Case{
			{ID: "0", Status: Pass}, {ID: "1", Status: Fail}, {ID: "2", Status: Pass}, {ID: "3", Status: Fail}, {ID: "4", Status: Pass},
		},
		warnings: []string{"5 cases report no latency; sent as 0 ms"},
	}, {
		// exact_match under two filters: the first line's filter, the other's lines counted.
		name:  "two filters, the first line's",
		paths: []string{lmevalSamples("gsm8k")},
		want:  []Case{{ID: "0", Status: Pass}, {ID: "1", Status: Fail}, {ID: "2", Status: Fail}},
		warnings: []string{
			"3 cases report no latency; sent as 0 ms",
			`3 lines of other filters than "strict-match" skipped (--filter chooses another)`,
		},
	}, {
		name:  "two filters, --filter",
		paths: []string{lmevalSamples("gsm8k")},
		opts:  Options{Filter: "flexible-extract"},
		want:  []Case{{ID: "0", Status: Pass}, {ID: "1", Status: Pass}, {ID: "2", Status: Fail}},
		warnings: []string{
			"3 cases report no latency; sent as 0 ms",
			`3 lines of other filters than "flexible-extract" skipped (--filter chooses another)`,
		},
	}, {
		name:     "booleans",
		paths:    []string{lmevalSamples("boolq")},
		want:     []Case{{ID: "0", Status: Pass}, {ID: "1", Status: Fail}, {ID: "2", Status: Pass}},
		warnings: []string{"3 cases report no latency; sent as 0 ms"},
	}, {
		// A score per document, with a threshold: em (the first metric) >= 0.5.
		name:     "a score and --pass-threshold",
		paths:    []string{lmevalSamples("drop")},
		opts:     Options{PassThreshold: &threshold},
		want:     []Case{{ID: "0", Status: Fail}, {ID: "1", Status: Pass}},
		warnings: []string{"2 cases report no latency; sent as 0 ms"},
	}, {
		// 0.4.3 to 0.4.6: no metrics list and no filter: the metric members in their order.
		name:     "0.4.5 lines",
		paths:    []string{lmevalPath("v0.4.5/samples_arc_easy_2024-06-01T08-00-00.000001.jsonl")},
		want:     []Case{{ID: "0", Status: Pass}, {ID: "1", Status: Fail}, {ID: "2", Status: Pass}},
		warnings: []string{"3 cases report no latency; sent as 0 ms"},
	}, {
		// 0.4.0 to 0.4.2: one JSON array, raw numbers and booleans in the answers.
		name:     "0.4.2 array",
		paths:    []string{lmevalPath("v0.4.2/pretrained__EleutherAI__pythia-14m_arc_easy.jsonl")},
		want:     []Case{{ID: "0", Status: Pass}, {ID: "1", Status: Fail}, {ID: "2", Status: Pass}, {ID: "3", Status: Pass}},
		warnings: []string{"4 cases report no latency; sent as 0 ms"},
	}, {
		// The 0.3 line's --write_out: metric values as text; prompt_N, logit_N and truth unread.
		name:     "0.3 write_out",
		paths:    []string{lmevalPath("v0.3/arc_easy_write_out_info.json")},
		want:     []Case{{ID: "0", Status: Pass}, {ID: "1", Status: Fail}, {ID: "2", Status: Pass}},
		warnings: []string{"3 cases report no latency; sent as 0 ms"},
	}, {
		// An output directory of two tasks: the model's directory below it; ids by task.
		name:  "output directory",
		paths: []string{lmevalPath("run")},
		want: []Case{
			{ID: "boolq:0", Status: Pass}, {ID: "boolq:1", Status: Pass},
			{ID: "hellaswag:0", Status: Pass}, {ID: "hellaswag:1", Status: Fail}, {ID: "hellaswag:2", Status: Pass},
		},
		warnings: []string{"5 cases report no latency; sent as 0 ms"},
	}, {
		name:  "two samples files",
		paths: []string{lmevalSamples("boolq"), lmevalSamples("hellaswag")},
		want: []Case{
			{ID: "boolq:0", Status: Pass}, {ID: "boolq:1", Status: Fail}, {ID: "boolq:2", Status: Pass},
			{ID: "hellaswag:0", Status: Pass}, {ID: "hellaswag:1", Status: Fail}, {ID: "hellaswag:2", Status: Pass},
			{ID: "hellaswag:3", Status: Fail}, {ID: "hellaswag:4", Status: Pass},
		},
		warnings: []string{"8 cases report no latency; sent as 0 ms"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := checkConversion(t, "lmeval", tc.paths, tc.opts, tc.want, tc.warnings)
			if res.Format != "lmeval" || !strings.HasPrefix(res.Request.RunID, "lmeval-") {
				t.Errorf("format %s, run id %s", res.Format, res.Request.RunID)
			}
		})
	}
}

// TestLmevalRefused: results that are not a pass or a fail per document are
// refused with what to do, naming the metric and never a value's text.
func TestLmevalRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		opts  Options
		want  []string
	}{
		{"perplexity", []string{lmevalSamples("wikitext")}, Options{}, []string{`the metric "word_perplexity" is not a number per document`}},
		{"corpus F1", []string{lmevalSamples("squad")}, Options{}, []string{`the metric "f1" is not a number per document`}},
		{"a score without a threshold", []string{lmevalSamples("drop")}, Options{}, []string{`the metric "em" is 0.25 for a document, not 1 or 0`, "--pass-threshold"}},
		{"aggregates", []string{lmevalPath("results" + lmevalDate + ".json")}, Options{}, []string{"aggregate results only", "--log_samples", "samples_<task>_<date>.jsonl"}},
		{"a directory of aggregates", []string{lmevalPath("aggregates-only")}, Options{}, []string{"aggregate results only", "--log_samples"}},
		{"no such filter", []string{lmevalSamples("gsm8k")}, Options{Filter: "take-first"}, []string{`has no line of filter "take-first"`, "strict-match, flexible-extract"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Format = "lmeval"
			_, err := Convert(tc.paths, opts)
			var unusable *UnusableError
			if !errors.As(err, &unusable) {
				t.Fatalf("Convert = %v, want an UnusableError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q: %v", w, err)
				}
			}
			if strings.Contains(strings.ToUpper(err.Error()), secretMarker) {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}

func TestLmevalDetect(t *testing.T) {
	for path, want := range map[string]string{
		lmevalSamples("hellaswag"):                   "lmeval",
		lmevalPath("results" + lmevalDate + ".json"): "lmeval",
		lmevalPath("run"):                            "lmeval",
		lmevalPath("aggregates-only"):                "lmeval",
		lmevalPath("v0.4.2/pretrained__EleutherAI__pythia-14m_arc_easy.jsonl"): "lmeval",
		lmevalPath("v0.3/arc_easy_write_out_info.json"):                        "lmeval",
	} {
		if got, err := Detect(path); err != nil || got != want {
			t.Errorf("Detect(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
	res, err := Convert([]string{lmevalSamples("boolq")}, Options{Format: "auto"})
	if err != nil || res.Format != "lmeval" {
		t.Errorf("auto: %v %+v", err, res)
	}
}

// TestLmevalPrivate: the prompt, the answers and the gold answer, marked in
// every field that holds them, never reach a request, a warning or an error.
func TestLmevalPrivate(t *testing.T) {
	dir := t.TempDir()
	line := `{"doc_id": "SECRETMARKER-7", "doc": {"question": "SECRETMARKER"}, "target": "SECRETMARKER",` +
		` "arguments": {"gen_args_0": {"arg_0": "SECRETMARKER"}}, "resps": [["SECRETMARKER"]], "filtered_resps": ["SECRETMARKER"],` +
		` "filter": "none", "metrics": ["exact_match"], "doc_hash": "SECRETMARKER", "prompt_hash": "SECRETMARKER", "target_hash": "SECRETMARKER",` +
		` "exact_match": 1.0, "notes": "SECRETMARKER"}`
	p := filepath.Join(dir, "samples_task"+lmevalDate+".jsonl")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(line, `"SECRETMARKER-7"`, "7")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, "lmeval", p)
	res := convertOK(t, "lmeval", p)
	if len(res.Request.Cases) != 1 || res.Request.Cases[0].Status != Pass {
		t.Errorf("cases %+v", res.Request.Cases)
	}
	// Every refusal of a file full of markers, and the older shapes.
	line = strings.ReplaceAll(line, `"SECRETMARKER-7"`, "7")
	for _, variant := range []string{
		"[" + strings.Replace(line, `"metrics": ["exact_match"],`, "", 1) + "]",
		`[{"doc_id": 1, "prompt_0": "SECRETMARKER", "logit_0": -1, "truth": "SECRETMARKER", "acc": "1.0", "note": "SECRETMARKER"}]`,
		`[{"doc_id": 1, "prompt_0": "SECRETMARKER", "acc": "SECRETMARKER SECRETMARKER SECRETMARKER SECRETMARKER"}]`,
		strings.Replace(line, `"exact_match": 1.0`, `"exact_match": ["SECRETMARKER", "SECRETMARKER"]`, 1),
		strings.Replace(line, `"exact_match": 1.0`, `"exact_match": 0.75`, 1),
		strings.Replace(line, `"filter": "none"`, `"filter": "other"`, 1) + "\n" + line,
		line + "\n" + `{"doc_id": 1, "resps": "SECRETMARKER`,
	} {
		os.WriteFile(p, []byte(variant+"\n"), 0o600)
		checkPrivate(t, "lmeval", p)
	}
}

func FuzzLmeval(f *testing.F) {
	paths := []string{lmevalPath("v0.4.5/samples_arc_easy_2024-06-01T08-00-00.000001.jsonl"),
		lmevalPath("v0.4.2/pretrained__EleutherAI__pythia-14m_arc_easy.jsonl"), lmevalPath("v0.3/arc_easy_write_out_info.json")}
	for _, task := range []string{"hellaswag", "gsm8k", "wikitext", "squad", "drop", "boolq"} {
		paths = append(paths, lmevalSamples(task))
	}
	fuzzFiles(f, "lmeval", ".jsonl", paths)
}
