package convert

import (
	"archive/zip"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
)

const warnInspectUnfinished = "%d Inspect logs are of runs that did not finish with status success; the samples they hold are sent"

// zipMethodZstd is the zip compression method of zstd, which new .eval logs use.
const zipMethodZstd = 93

// looksInspect knows a .json log, and an .eval's header.json, by the eval
// spec's task and model.
func looksInspect(sh *shape) bool {
	return sh.subHas("eval", "task", "model") && (sh.has("version") || sh.has("status"))
}

// readInspect reads an Inspect AI log of log format version 1 or 2: a .json
// document or an .eval zip (members deflated or zstd, method 93).
//
// Read: eval.run_id, eval.config.epochs, status, the scorer order of
// results.scores[].scorer and .name (version 1: results.scorer.name), and of
// each sample id, epoch, whether error is set, limit.type, the value of each
// of scores{name: Score} (version 1: score), total_time, working_time and
// model_usage{model: {input_tokens, output_tokens, total_tokens,
// input_tokens_cache_read, input_tokens_cache_write, total_cost}}. All else
// (input, target, messages, events, output, attachments, store, metadata,
// score answers, explanations and history, plan, stats, reductions, the
// journal's summaries) is skipped unread.
//
// Decisions of this converter where docs/design.md#122-status-rules-by-format is silent:
//   - A score value NaN (Inspect's sentinel for "unscored", written as the
//     bare constant NaN), null, {} or a dict of nothing but NaN and null is
//     no score: no tool check, and the next scorer decides. A dict's NaN and
//     null values are left out of its verdict. A list fails.
//   - total_tokens counts as given when above 0 and not below output_tokens:
//     Inspect writes 0 where the provider reported none.
//   - A log that did not end in status success, or an .eval without
//     header.json (a run still going, or killed), is converted from the
//     samples it holds, with a warning.
//   - A log that holds no sample is refused.
//   - .eval samples are taken in the order Inspect lists them (by epoch, then
//     id); of members written twice under one name, the last counts, as in
//     Inspect. .json samples are taken in document order.
func readInspect(path string, s *sink) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(4)
	if bytes.HasPrefix(head, []byte("PK")) {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return readInspectZip(path, f, fi.Size(), s)
	}
	if bytes.HasPrefix(head, []byte("\xef\xbb\xbf")) {
		br.Discard(3)
	}
	return readInspectJSON(path, br, s)
}

// inspectLog holds what one log says about its run, and small facts per sample.
type inspectLog struct {
	path    string
	runID   string
	epochs  int
	status  string
	sawEval bool
	order   []string // scorer names in results order
	first   string   // the name of the results' first score, for version 1 samples
	samples []inspectSample
	names   map[string]string // scorer names, interned
}

type inspectSample struct {
	id         string
	idNumber   bool
	epoch      int
	errored    bool
	timedOut   bool
	latency    float64
	hasLatency bool
	input      *int64
	output     *int64
	cost       *float64
	scores     []inspectScore // scored only, in the sample's order
}

type inspectScore struct {
	name string // "" for the version 1 sample.score
	pass bool
}

func newInspectLog(path string) *inspectLog {
	return &inspectLog{path: path, names: map[string]string{}}
}

func readInspectJSON(path string, r io.Reader, s *sink) error {
	j := newJSONReader(r, path)
	if j.kind() != '{' {
		return errNotFormat
	}
	l := newInspectLog(path)
	if err := l.readDoc(j, s, true); err != nil {
		return err
	}
	if err := j.end(); err != nil {
		return err
	}
	if !l.sawEval {
		return errNotFormat
	}
	return l.emit(s)
}

// readInspectZip reads an .eval log: header.json (or, in a run that did not
// finish, _journal/start.json) for the run, then each samples/ member.
func readInspectZip(path string, f io.ReaderAt, size int64, s *sink) error {
	zr, err := zip.NewReader(f, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return fmt.Errorf("%s: not a readable .eval (zip) file: %v", path, err)
	}
	zr.RegisterDecompressor(zipMethodZstd, newZstdReader)

	last := make(map[string]int, len(zr.File))
	nSamples := 0
	for i, zf := range zr.File {
		last[zf.Name] = i
		if isInspectSampleMember(zf.Name) {
			nSamples++
		}
	}
	l := newInspectLog(path)
	head, ok := last["header.json"]
	if !ok {
		head, ok = last["_journal/start.json"]
	}
	if !ok && nSamples == 0 {
		return errNotFormat
	}
	if ok {
		err := readInspectMember(path, zr.File[head], head, func(j *jsonReader) error {
			return l.readDoc(j, s, false)
		})
		if err != nil {
			return err
		}
	}
	var members []int
	for i, zf := range zr.File {
		if isInspectSampleMember(zf.Name) && last[zf.Name] == i {
			members = append(members, i)
		}
	}
	// Each member is opened, and so inflated, while the one before is read:
	// inflating is half of the time, and runs on another core.
	var next *inspectMember
	defer func() { next.close() }()
	for k, i := range members {
		cur := next
		if cur == nil {
			if cur, err = openInspectMember(path, zr.File[i], i); err != nil {
				return err
			}
		}
		next = nil
		if k+1 < len(members) {
			if next, err = openInspectMember(path, zr.File[members[k+1]], members[k+1]); err != nil {
				cur.close()
				return err
			}
		}
		err := cur.read(func(j *jsonReader) error {
			smp, err := l.readSample(j, s)
			l.samples = append(l.samples, smp)
			return err
		})
		cur.close()
		if err != nil {
			return err
		}
	}
	sort.SliceStable(l.samples, func(a, b int) bool {
		x, y := &l.samples[a], &l.samples[b]
		if x.epoch != y.epoch {
			return x.epoch < y.epoch
		}
		return x.sortKey() < y.sortKey()
	})
	return l.emit(s)
}

func isInspectSampleMember(name string) bool {
	return strings.HasPrefix(name, "samples/") && strings.HasSuffix(name, ".json")
}

// readInspectMember streams one JSON member of the zip into read.
func readInspectMember(path string, zf *zip.File, i int, read func(j *jsonReader) error) error {
	m, err := openInspectMember(path, zf, i)
	if err != nil {
		return err
	}
	defer m.close()
	return m.read(read)
}

// inspectMember is a JSON member of the zip, read ahead from when it is opened.
type inspectMember struct {
	rc io.ReadCloser
	j  *jsonReader
}

// openInspectMember opens a member. Members are named by their position:
// their names hold sample ids.
func openInspectMember(path string, zf *zip.File, i int) (*inspectMember, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: zip member %d: %v", path, i+1, err)
	}
	return &inspectMember{rc: rc, j: newJSONReaderAhead(rc, fmt.Sprintf("%s: zip member %d", path, i+1))}, nil
}

// read streams the member into read, and checks that nothing follows.
func (m *inspectMember) read(read func(j *jsonReader) error) error {
	if err := read(m.j); err != nil {
		return err
	}
	// Reading to the end also checks the member's CRC.
	return m.j.end()
}

func (m *inspectMember) close() {
	if m != nil {
		m.j.close()
		m.rc.Close()
	}
}

func newZstdReader(r io.Reader) io.ReadCloser {
	d, err := zstd.NewReader(r,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(1<<27), // zstd's largest standard level
	)
	if err != nil {
		return io.NopCloser(inspectErrReader{err})
	}
	return d.IOReadCloser()
}

type inspectErrReader struct{ err error }

func (e inspectErrReader) Read([]byte) (int, error) { return 0, e.err }

// sortKey is Inspect's: numeric ids zero-filled to 20 characters.
func (smp *inspectSample) sortKey() string {
	id := smp.id
	if !smp.idNumber || len(id) >= 20 {
		return id
	}
	sign := ""
	if id[0] == '-' || id[0] == '+' {
		sign, id = id[:1], id[1:]
	}
	return sign + strings.Repeat("0", 20-len(sign)-len(id)) + id
}

// readDoc reads a log document: a .json log, or an .eval's header.json or
// _journal/start.json (withSamples false).
func (l *inspectLog) readDoc(j *jsonReader, s *sink, withSamples bool) error {
	return j.object(func(name string) error {
		switch name {
		case "status":
			v, _, err := j.str()
			l.status = v
			return err
		case "eval":
			if j.kind() == '{' {
				l.sawEval = true
			}
			return l.readEval(j)
		case "results":
			return l.readResults(j)
		case "samples":
			if !withSamples {
				return j.skip()
			}
			return j.array(func(int) error {
				smp, err := l.readSample(j, s)
				l.samples = append(l.samples, smp)
				return err
			})
		}
		return j.skip()
	})
}

func (l *inspectLog) readEval(j *jsonReader) error {
	return j.object(func(name string) error {
		switch name {
		case "run_id":
			v, _, err := j.str()
			l.runID = v
			return err
		case "config":
			return j.object(func(name string) error {
				if name != "epochs" {
					return j.skip()
				}
				v, ok, err := j.number()
				if ok && v > 0 && v < 1e9 {
					l.epochs = int(v)
				}
				return err
			})
		}
		return j.skip()
	})
}

func (l *inspectLog) readResults(j *jsonReader) error {
	return j.object(func(name string) error {
		switch name {
		case "scores": // version 2
			return j.array(func(i int) error {
				return j.object(func(name string) error {
					if name != "scorer" && name != "name" {
						return j.skip()
					}
					v, ok, err := j.str()
					if ok {
						if name == "name" && i == 0 {
							l.first = v
						}
						l.addOrder(v)
					}
					return err
				})
			})
		case "scorer": // version 1
			return j.object(func(name string) error {
				if name != "name" {
					return j.skip()
				}
				v, ok, err := j.str()
				if ok {
					l.first = v
					l.addOrder(v)
				}
				return err
			})
		}
		return j.skip()
	})
}

func (l *inspectLog) addOrder(name string) {
	for _, n := range l.order {
		if n == name {
			return
		}
	}
	l.order = append(l.order, name)
}

func (l *inspectLog) intern(name string) string {
	if n, ok := l.names[name]; ok {
		return n
	}
	if len(l.names) < 1024 {
		l.names[name] = name
	}
	return name
}

func (l *inspectLog) readSample(j *jsonReader, s *sink) (inspectSample, error) {
	smp := inspectSample{epoch: 1}
	var usage inspectUsage
	var totalTime, workingTime float64
	var hasTotal, hasWorking bool
	err := j.object(func(name string) error {
		var err error
		switch name {
		case "id":
			smp.idNumber = j.kind() == '0'
			smp.id, _, err = j.id()
		case "epoch":
			v, ok, err := j.number()
			if ok && v >= 1 && v < 1e9 && v == float64(int(v)) {
				smp.epoch = int(v)
			}
			return err
		case "scores":
			return j.object(func(scorer string) error {
				return l.readScore(j, l.intern(scorer), &smp)
			})
		case "score": // version 1
			return l.readScore(j, "", &smp)
		case "error":
			null, err := j.isNull()
			if err != nil || null {
				return err
			}
			smp.errored = true
			return j.skip()
		case "limit":
			return j.object(func(name string) error {
				if name != "type" {
					return j.skip()
				}
				v, _, err := j.str()
				if v == "time" || v == "working" {
					smp.timedOut = true
				}
				return err
			})
		case "total_time":
			totalTime, hasTotal, err = j.number()
		case "working_time":
			workingTime, hasWorking, err = j.number()
		case "model_usage":
			return j.object(func(string) error { return usage.read(j) })
		default:
			err = j.skip()
		}
		return err
	})
	if err != nil {
		return smp, err
	}
	switch {
	case hasTotal:
		smp.latency, smp.hasLatency = totalTime*1000, true
	case hasWorking:
		smp.latency, smp.hasLatency = workingTime*1000, true
	}
	if usage.hasInput {
		smp.input = s.tokens(usage.input)
	}
	if usage.hasOutput {
		smp.output = s.tokens(usage.output)
	}
	if usage.hasCost {
		cost := usage.cost
		smp.cost = &cost
	}
	return smp, nil
}

// readScore reads a Score object, keeping only its verdict.
func (l *inspectLog) readScore(j *jsonReader, name string, smp *inspectSample) error {
	var scored, pass bool
	err := j.object(func(member string) error {
		if member != "value" {
			return j.skip()
		}
		var err error
		scored, pass, err = readInspectValue(j)
		return err
	})
	if scored {
		smp.scores = append(smp.scores, inspectScore{name: name, pass: pass})
	}
	return err
}

// readInspectValue reads a Score's value: C, true and numbers ≥ 1 pass, a
// dict when all its scored values pass. scored is false for null (NaN is
// read as null) and a dict without a scored value.
func readInspectValue(j *jsonReader) (scored, pass bool, err error) {
	if j.kind() != '{' {
		return readInspectScalar(j)
	}
	pass = true
	err = j.object(func(string) error {
		ok, p, err := readInspectScalar(j)
		if ok {
			scored = true
			pass = pass && p
		}
		return err
	})
	return scored, scored && pass, err
}

func readInspectScalar(j *jsonReader) (scored, pass bool, err error) {
	switch j.kind() {
	case 'n':
		return false, false, j.skip()
	case 't', 'f':
		v, _, err := j.boolean()
		return true, v, err
	case '"':
		// Compared in place: a custom scorer's string may be free text.
		is, _, err := j.stringIs("C")
		return true, is, err
	case '0':
		v, err := j.float() // ±Inf beyond a double's range
		return true, v >= 1, err
	}
	return true, false, j.skip() // a list, or a dict nested in a dict
}

// inspectUsage sums a sample's model_usage over its models.
type inspectUsage struct {
	input, output, cost          float64
	hasInput, hasOutput, hasCost bool
}

func (u *inspectUsage) read(j *jsonReader) error {
	var input, output, total, cacheRead, cacheWrite, cost float64
	var hasInput, hasOutput, hasTotal, hasRead, hasWrite, hasCost bool
	err := j.object(func(name string) error {
		var err error
		switch name {
		case "input_tokens":
			input, hasInput, err = j.number()
		case "output_tokens":
			output, hasOutput, err = j.number()
		case "total_tokens":
			total, hasTotal, err = j.number()
		case "input_tokens_cache_read":
			cacheRead, hasRead, err = j.number()
		case "input_tokens_cache_write":
			cacheWrite, hasWrite, err = j.number()
		case "total_cost":
			cost, hasCost, err = j.number()
		default:
			err = j.skip()
		}
		return err
	})
	if hasOutput {
		u.output += output
		u.hasOutput = true
	}
	// Inspect writes total_tokens 0 when the provider gave none.
	switch {
	case hasTotal && total > 0 && total >= output:
		u.input += total - output
		u.hasInput = true
	case hasInput || hasRead || hasWrite:
		u.input += input + cacheRead + cacheWrite
		u.hasInput = true
	}
	if hasCost {
		u.cost += cost
		u.hasCost = true
	}
	return err
}

// emit decides each sample's status and adds the cases in order.
func (l *inspectLog) emit(s *sink) error {
	if len(l.samples) == 0 {
		return &UnusableError{
			Reason: l.path + ": the Inspect log holds no sample",
			Hint:   "convert the log of a run that completed samples, written without --no-log-samples",
		}
	}
	rank := make(map[string]int, len(l.order))
	for i, n := range l.order {
		rank[n] = i
	}
	multiEpoch := l.epochs > 1
	scored := false
	for i := range l.samples {
		smp := &l.samples[i]
		multiEpoch = multiEpoch || smp.epoch > 1
		scored = scored || smp.errored || smp.timedOut || len(smp.scores) > 0
		for k := range smp.scores {
			if smp.scores[k].name == "" {
				smp.scores[k].name = l.first
			}
		}
		// Scorers the results name first, in their order; then the others.
		sort.SliceStable(smp.scores, func(a, b int) bool {
			ra, oka := rank[smp.scores[a].name]
			rb, okb := rank[smp.scores[b].name]
			return oka && (!okb || ra < rb)
		})
	}
	if !scored {
		return &UnusableError{
			Reason: l.path + ": no sample of the Inspect log is scored",
			Hint:   "run the scorer first (inspect score LOG), then convert the scored log",
		}
	}
	if l.status != "success" {
		s.warn(warnInspectUnfinished)
	}
	s.setRunID(l.runID)
	for i := range l.samples {
		smp := &l.samples[i]
		c := Case{
			LatencyMS:    smp.latency,
			InputTokens:  smp.input,
			OutputTokens: smp.output,
			Cost:         smp.cost,
		}
		if multiEpoch {
			c.ID = s.caseID(smp.id, fmt.Sprintf(":e%d", smp.epoch))
			c.RepeatGroup = s.caseID(smp.id, "")
		} else {
			c.ID = s.caseID(smp.id, "")
		}
		switch {
		case smp.errored:
			c.Status = Error
		case smp.timedOut:
			c.Status = Timeout
		case len(smp.scores) == 0:
			c.Status = Error
		case smp.scores[0].pass:
			c.Status = Pass
		default:
			c.Status = Fail
		}
		for _, sc := range smp.scores {
			name := sc.name
			if name == "" {
				name = "score"
			}
			c.ToolChecks = append(c.ToolChecks, s.check(name, sc.pass))
		}
		if !smp.hasLatency {
			s.warn(warnNoLatency)
		}
		s.add(c)
	}
	return nil
}
