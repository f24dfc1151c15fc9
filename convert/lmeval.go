package convert

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// lm-evaluation-harness (EleutherAI) per-sample logs: the JSON lines that
// --log_samples writes, one per document and filter, as
// <output_path>/<model>/samples_<task>_<date>.jsonl. A line carries the
// document's doc_id, the filter, the list of the task's metric names
// ("metrics") and each metric's value for the document as a member of its
// own. Only those are read: doc, arguments, resps, filtered_resps and target
// hold the prompt, the gold answer and the model's answers, and are skipped
// without being kept, as is every other member that is not a number or a
// boolean.
//
// A case is a document. Its status comes from the first metric of the line's
// list whose value is a number or a boolean: 1 or true passes, 0 or false
// fails; another number is not a pass or a fail per document (a perplexity,
// a score), and needs Options.PassThreshold; a value that is neither (an F1
// kept as a gold and prediction pair for a corpus score) cannot be used.
// The harness records no latency, tokens or cost per document.
//
// results_<date>.json holds only aggregates: it is recognised, and refused
// with the advice to convert the samples.

// lmevalSamplesName is the samples file name of lm-eval 0.4.x: the task and
// the date the run started (EvaluationTracker's date_id).
var lmevalSamplesName = regexp.MustCompile(`^samples_(.+)_(\d{4}-\d{2}-\d{2}T[0-9.:_-]+)\.jsonl$`)

// lmevalTask is the task a samples file is of: its file name's, else the
// file name without its extension.
func lmevalTask(path string) string {
	base := filepath.Base(path)
	if m := lmevalSamplesName.FindStringSubmatch(base); m != nil {
		return m[1]
	}
	return strings.TrimSuffix(strings.TrimPrefix(base, "samples_"), filepath.Ext(base))
}

// lmevalSamplesFiles lists the samples files of an lm-eval output directory:
// in it, or one level down (the model's directory).
func lmevalSamplesFiles(dir string) ([]string, error) {
	var files []string
	for _, pattern := range []string{"samples_*.jsonl", "*/samples_*.jsonl"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	return files, nil
}

// lmevalResultsFiles lists the aggregate results files of an output
// directory: results*.json files that are lm-eval's.
func lmevalResultsFiles(dir string) []string {
	var files []string
	for _, pattern := range []string{"results*.json", "*/results*.json"} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range m {
			if isLmevalJSON(f) {
				files = append(files, f)
			}
		}
	}
	return files
}

// lmevalDoc is a document of a task.
type lmevalDoc struct{ task, docID string }

// lmevalState is what the reader keeps across the files of one conversion.
type lmevalState struct {
	tasks map[string]bool
	// cases are the task and doc_id of each case the reader added, by index.
	cases map[int]lmevalDoc
}

func readLmeval(path string, s *sink) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	files := []string{path}
	if fi.IsDir() {
		if files, err = lmevalSamplesFiles(path); err != nil {
			return err
		}
		if len(files) == 0 {
			if len(lmevalResultsFiles(path)) > 0 {
				return lmevalAggregatesOnly(path)
			}
			return errNotFormat
		}
	}
	if s.lmeval == nil {
		s.lmeval = &lmevalState{tasks: map[string]bool{}, cases: map[int]lmevalDoc{}}
		s.afterRead = append(s.afterRead, s.lmeval.prefixTasks(s))
	}
	for _, f := range files {
		if err := readLmevalFile(f, s); err != nil {
			return err
		}
	}
	return nil
}

func lmevalAggregatesOnly(path string) error {
	return &UnusableError{
		Reason: path + " holds lm-evaluation-harness's aggregate results only, not one outcome per document",
		Hint:   "run lm_eval again with --log_samples and convert the samples_<task>_<date>.jsonl files it writes beside it (or their directory)",
	}
}

func readLmevalFile(path string, s *sink) error {
	j, f, err := openJSON(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := &lmevalFileReader{path: path, task: lmevalTask(path), filter: s.opts.Filter, s: s}
	switch j.kind() {
	case '{': // JSON lines, 0.4.3 on
		for j.kind() == '{' {
			if err := r.line(j); err != nil {
				return err
			}
		}
	case '[': // one array: 0.4.0 to 0.4.2, and --write_out of the 0.3 line
		if err := j.array(func(int) error { return r.line(j) }); err != nil {
			return err
		}
	default:
		return errNotFormat
	}
	if err := j.end(); err != nil {
		if r.lines == 0 {
			return errNotFormat
		}
		return err
	}
	if r.lines == 0 {
		return errNotFormat
	}
	if r.skipped == r.lines {
		return &UnusableError{
			Reason: fmt.Sprintf("%s has no line of filter %q", path, r.filter),
			Hint:   "choose one of its filters with --filter: " + strings.Join(r.filters, ", "),
		}
	}
	// The filter's name in a warning's format: its own % doubled.
	s.warnN("%d lines of other filters than "+strings.ReplaceAll(strconv.Quote(r.filter), "%", "%%")+" skipped (--filter chooses another)", r.skipped)
	return nil
}

// lmevalFileReader reads the lines of one samples file.
type lmevalFileReader struct {
	path, task, filter string
	filters            []string // seen, in order
	lines, skipped     int
	s                  *sink
}

func (r *lmevalFileReader) line(j *jsonReader) error {
	line, isSample, err := readLmevalLine(j)
	if err != nil {
		return err
	}
	if !isSample {
		if r.lines == 0 && line.others["results"] {
			return lmevalAggregatesOnly(r.path)
		}
		return errNotFormat
	}
	r.lines++
	if !slices.Contains(r.filters, line.filter) {
		r.filters = append(r.filters, line.filter)
	}
	if r.filter == "" && r.lines == 1 {
		r.filter = line.filter // the first line's
	}
	if line.filter != r.filter {
		r.skipped++
		return nil
	}
	c, err := lmevalCase(r.path, line, r.s)
	if err != nil {
		return err
	}
	st := r.s.lmeval
	st.tasks[r.task] = true
	st.cases[len(r.s.cases)] = lmevalDoc{r.task, line.docID}
	c.ID = r.s.caseID(line.docID, "")
	r.s.add(c)
	return nil
}

// lmevalLine is what the reader keeps of one line.
type lmevalLine struct {
	docID  string
	filter string
	// metrics are the line's list of metric names; before 0.4.7, which has
	// none, the members that hold a metric's value, in their order.
	metrics []string
	// values are the metric values that are numbers or booleans (as 1 and 0),
	// and others the names of the members that are neither.
	values map[string]float64
	others map[string]bool
}

// lmevalSkipped are the members that hold the prompt, the answers or the
// gold answer (and their hashes): skipped unread. The 0.3 line's write_out
// adds prompt_N, logit_N and truth.
func lmevalSkipped(name string) bool {
	switch name {
	case "doc", "arguments", "resps", "filtered_resps", "target", "doc_hash", "prompt_hash", "target_hash", "truth":
		return true
	}
	return strings.HasPrefix(name, "prompt_") || strings.HasPrefix(name, "logit_")
}

// readLmevalLine reads one sample line. isSample is false when the object is
// not one: it has no doc_id, or no metric.
func readLmevalLine(j *jsonReader) (line lmevalLine, isSample bool, err error) {
	line.values = map[string]float64{}
	line.others = map[string]bool{}
	var order []string // the members with a metric's value
	hasDocID, hasMetrics := false, false
	err = j.object(func(name string) error {
		switch {
		case lmevalSkipped(name):
			return j.skip()
		case name == "doc_id":
			v, ok, err := j.id()
			line.docID, hasDocID = v, ok
			return err
		case name == "filter":
			v, _, err := j.str()
			line.filter = v
			return err
		case name == "metrics":
			hasMetrics = true
			return j.array(func(int) error {
				v, ok, err := j.str()
				if ok {
					line.metrics = append(line.metrics, v)
				}
				return err
			})
		}
		switch j.kind() {
		case '0':
			v, ok, err := j.number()
			if ok {
				line.values[name] = v
				order = append(order, name)
			} else {
				line.others[name] = true
			}
			return err
		case 't', 'f':
			v, _, err := j.boolean()
			line.values[name] = 0
			if v {
				line.values[name] = 1
			}
			order = append(order, name)
			return err
		case '"': // the 0.3 line writes a metric's value as its text: "1.0"
			v, err := j.shortNumberString()
			if err == nil && v != nil {
				line.values[name] = *v
				order = append(order, name)
			} else {
				line.others[name] = true
			}
			return err
		}
		line.others[name] = true
		return j.skip()
	})
	if !hasMetrics {
		line.metrics = order
	}
	return line, err == nil && hasDocID && len(line.metrics) > 0, err
}

// lmevalCase makes the case of a line: its status from its first metric.
func lmevalCase(path string, line lmevalLine, s *sink) (Case, error) {
	c := Case{}
	s.warn(warnNoLatency)
	for _, m := range line.metrics {
		v, ok := line.values[m]
		if !ok {
			if line.others[m] {
				return c, &UnusableError{
					Reason: fmt.Sprintf("%s: the metric %q is not a number per document (a corpus-level score keeps its parts there)", path, m),
					Hint:   "evalmeter needs a pass or a fail per document: convert a task whose metric is one (acc, exact_match, ...)",
				}
			}
			continue
		}
		switch t := s.opts.PassThreshold; {
		case t != nil && v >= *t:
			c.Status = Pass
		case t != nil:
			c.Status = Fail
		case v == 1:
			c.Status = Pass
		case v == 0:
			c.Status = Fail
		default:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return c, &UnusableError{
					Reason: fmt.Sprintf("%s: the metric %q is not a finite number for document %s", path, m, strconv.Quote(line.docID)),
					Hint:   "convert a task whose metric is a pass or a fail per document",
				}
			}
			return c, &UnusableError{
				Reason: fmt.Sprintf("%s: the metric %q is %g for a document, not 1 or 0: it is not a pass or a fail per document", path, m, v),
				Hint:   fmt.Sprintf("give --pass-threshold T to count a value of at least T as a pass (for %s, a threshold that means something for that metric)", m),
			}
		}
		return c, nil
	}
	return c, &UnusableError{
		Reason: fmt.Sprintf("%s: document %s has no value for its metrics (%s)", path, strconv.Quote(line.docID), strings.Join(line.metrics, ", ")),
		Hint:   "convert the samples file as lm_eval --log_samples wrote it",
	}
}

// prefixTasks names the cases by task and document when the conversion read
// several tasks, whose doc_ids repeat.
func (st *lmevalState) prefixTasks(s *sink) func() {
	return func() {
		if len(st.tasks) < 2 {
			return
		}
		for i, doc := range st.cases {
			id, changed := fitID(doc.task+":"+doc.docID, "", maxIDLen)
			if changed {
				s.warn(warnIDRewritten)
			}
			s.cases[i].ID = id
		}
	}
}

// looksLmeval knows a samples line by its doc_id and its answers, and the
// aggregate results file by its results beside the tasks' configurations.
func looksLmeval(sh *shape) bool {
	sample := sh.has("doc_id") && (sh.has("resps") || sh.has("filtered_resps") || sh.has("arguments") || sh.has("prompt_0") || sh.has("truth"))
	results := sh.has("results") && (sh.has("configs") || sh.has("versions")) && (sh.has("n-shot") || sh.has("config") || sh.has("higher_is_better"))
	return sample || results
}

// isLmevalJSON reports whether a file's first JSON object looks like lm-eval's.
func isLmevalJSON(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sh, err := readShape(f, path)
	return err == nil && looksLmeval(sh)
}
