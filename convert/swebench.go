package convert

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// SWE-bench harness results (SWE-bench/SWE-bench, swebench/harness). Two
// files hold them:
//
//   - The run report <model>.<run_id>.json (reporting.py make_run_report, in
//     run_evaluation.py before 3.0). Read: resolved_ids, unresolved_ids
//     (2.0.0 on), empty_patch_ids and incomplete_ids (2.0.3 on), error_ids,
//     infra_failure_ids (5.0 on) and, before unresolved_ids existed,
//     completed_ids. Skipped: the counts, submitted_ids, ambiguous_failure_ids,
//     failure_reasons, containers and images.
//   - The instance report logs/run_evaluation/<run_id>/<model>/<id>/report.json
//     (grading.py get_eval_report), {id: {resolved, infra_failure (5.0 on),
//     patch_*, tests_status}}. Read: resolved and infra_failure; the test names
//     of tests_status are skipped. A directory is walked for these files.
//
// The harness reports no latency, tokens or cost. infra_failure_ids are also
// listed as unresolved or error (5.0 made them advisory); they are sent as
// error, as an instance report's infra_failure is. The run id lives only in
// file and directory names, which are not read.

// swebenchLists are the run report's lists of cases, in case order.
var swebenchLists = []struct {
	name   string
	status Status
}{
	{"resolved_ids", Pass},
	{"unresolved_ids", Fail},
	{"empty_patch_ids", Fail},
	{"error_ids", Error},
}

// warnListedTwice counts run report ids listed more than once.
const warnListedTwice = "%d instance ids are listed more than once in the run report; each counted once, by its first list of resolved, unresolved, empty patch, error"

// readSWEBench reads a run report, an instance report, or a directory of
// instance reports.
func readSWEBench(path string, s *sink) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return readSWEBenchFile(path, s)
	}
	var reports []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && d.Name() == "report.json" {
			reports = append(reports, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(reports) == 0 {
		return errNotFormat
	}
	for _, p := range reports { // WalkDir walks in lexical order
		if err := readSWEBenchInstanceFile(p, s); err != nil {
			return err
		}
	}
	return nil
}

// readSWEBenchInstanceFile reads a report.json found in a directory.
func readSWEBenchInstanceFile(path string, s *sink) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	if isBlank(br) {
		// The Modal runner leaves it empty when the evaluation raised, and
		// the harness counts the instance, named by its directory, an error.
		s.add(Case{ID: s.caseID(filepath.Base(filepath.Dir(path)), ""), Status: Error})
		s.warn(warnNoLatency)
		return nil
	}
	isRun, err := readSWEBenchJSON(br, path, s)
	if err == errNotFormat || err == nil && isRun {
		return &UnusableError{
			Reason: path + " is not a SWE-bench instance report",
			Hint:   "give the directory of instance reports logs/run_evaluation/<run_id>/<model>, or the run report <model>.<run_id>.json alone",
		}
	}
	return err
}

func readSWEBenchFile(path string, s *sink) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = readSWEBenchJSON(f, path, s)
	return err
}

// readSWEBenchJSON reads either kind of report and says which it was.
func readSWEBenchJSON(r io.Reader, path string, s *sink) (isRun bool, err error) {
	j := newJSONReader(r, path)
	if j.kind() != '{' {
		return false, errNotFormat
	}
	lists := map[string][]string{}
	var instances []Case
	incomplete := 0
	err = j.object(func(name string) error {
		switch name {
		case "resolved_ids", "unresolved_ids", "empty_patch_ids", "error_ids", "infra_failure_ids", "completed_ids":
			if j.kind() != '[' {
				return j.skip()
			}
			ids := []string{}
			err := j.array(func(int) error {
				id, ok, err := j.str()
				if ok {
					ids = append(ids, id)
				}
				return err
			})
			lists[name] = ids
			return err
		case "incomplete_ids":
			return j.array(func(int) error {
				incomplete++
				return j.skip()
			})
		}
		if j.kind() != '{' {
			return j.skip()
		}
		c, ok, err := readSWEBenchInstance(j)
		if ok {
			c.ID = name
			instances = append(instances, c)
		}
		return err
	})
	if err != nil {
		return false, err
	}
	if err := j.end(); err != nil {
		return false, err
	}

	if len(lists) > 0 {
		addSWEBenchRun(lists, s)
		s.warnN(warnIncompleteNotRu, incomplete)
		return true, nil
	}
	if len(instances) == 0 {
		return false, errNotFormat
	}
	for _, c := range instances {
		c.ID = s.caseID(c.ID, "")
		s.add(c)
		s.warn(warnNoLatency)
	}
	return false, nil
}

// readSWEBenchInstance reads the report object of one instance; ok is false
// when it has no resolved member, and so is not one.
func readSWEBenchInstance(j *jsonReader) (c Case, ok bool, err error) {
	var resolved, infra bool
	err = j.object(func(name string) error {
		var v, isBool bool
		var err error
		switch name {
		case "resolved":
			v, isBool, err = j.boolean()
			resolved, ok = v, isBool
		case "infra_failure":
			v, isBool, err = j.boolean()
			infra = v && isBool
		default:
			err = j.skip()
		}
		return err
	})
	switch {
	case resolved:
		c.Status = Pass
	case infra:
		c.Status = Error
	default:
		c.Status = Fail
	}
	return c, ok, err
}

// addSWEBenchRun adds the cases of a run report's lists.
func addSWEBenchRun(lists map[string][]string, s *sink) {
	if _, ok := lists["unresolved_ids"]; !ok {
		// Before 2.0.0, completed instances neither resolved nor in error were unresolved.
		done := map[string]bool{}
		for _, name := range []string{"resolved_ids", "error_ids"} {
			for _, id := range lists[name] {
				done[id] = true
			}
		}
		for _, id := range lists["completed_ids"] {
			if !done[id] {
				lists["unresolved_ids"] = append(lists["unresolved_ids"], id)
			}
		}
	}
	infra := map[string]bool{}
	for _, id := range lists["infra_failure_ids"] {
		infra[id] = true
	}
	seen := map[string]bool{}
	for _, l := range swebenchLists {
		for _, id := range lists[l.name] {
			if seen[id] {
				s.warn(warnListedTwice)
				continue
			}
			seen[id] = true
			c := Case{ID: s.caseID(id, ""), Status: l.status}
			if infra[id] && c.Status == Fail {
				c.Status = Error
			}
			s.add(c)
			s.warn(warnNoLatency)
		}
	}
}

// isBlank reports whether nothing but white space is left to read.
func isBlank(br *bufio.Reader) bool {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return true
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return br.UnreadByte() != nil
	}
}

// looksSWEBench recognises a run report by the lists every version has, and
// an instance report by the members of its one object.
func looksSWEBench(sh *shape) bool {
	if sh.has("completed_ids", "resolved_ids", "error_ids") {
		return true
	}
	for top := range sh.sub {
		if sh.subHas(top, "resolved", "patch_exists", "patch_successfully_applied") {
			return true
		}
	}
	return false
}
