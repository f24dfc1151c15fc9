package convert

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// Bounds of the metrics request, under the names the converters use.
const (
	maxIDLen        = metrics.MaxIDLength
	maxCheckNameLen = metrics.MaxToolNameLength
	maxToolChecks   = metrics.MaxToolChecks
	maxLatencyMS    = metrics.MaxLatencyMS
	maxTokens       = metrics.MaxTokens
	maxCost         = metrics.MaxCost
	maxSteps        = metrics.MaxSteps
)

// Warnings, counted per kind. Each is a format with one %d, the count.
const (
	warnNoLatency       = "%d cases report no latency; sent as 0 ms"
	warnBadLatency      = "%d cases report a negative or non-finite latency; sent as 0 ms"
	warnLongLatency     = "%d cases report a latency above 24 hours; sent as 86400000 ms"
	warnBadTokens       = "%d token counts are negative or not integers; left out"
	warnManyTokens      = "%d token counts are above 1000000000; sent as 1000000000"
	warnBadCost         = "%d costs are negative or non-finite; left out"
	warnHighCost        = "%d costs are above 1000000; sent as 1000000"
	warnChecksDropped   = "%d tool checks dropped: a case keeps its first 32"
	warnIDRewritten     = "%d ids rewritten to fit A-Z a-z 0-9 . _ : - and 128 characters"
	warnIDDuplicate     = "%d duplicate case ids got a suffix :2, :3, ... in file order"
	warnCheckRenamed    = "%d tool check names rewritten to fit A-Z a-z 0-9 . _ : - and 80 characters"
	warnStepsCapped     = "%d trace step counts above 100000; sent as 100000"
	warnObservedCapped  = "%d traces observed more steps than expected; observed sent as expected"
	warnRunIDsDisagree  = "%d files name different runs; the run id is derived from the cases (set --run-id)"
	warnRunIDRewritten  = "%d run ids rewritten to fit A-Z a-z 0-9 . _ : - and 128 characters"
	warnIDEmpty         = "%d cases have no id; named by their position"
	warnCheckNameEmpty  = "%d tool checks have no name; named check"
	warnSkippedDropped  = "%d skipped cases dropped"
	warnIncompleteNotRu = "%d instances never ran (incomplete); not counted"
)

// sink collects the cases of a conversion and fits them to the request's
// bounds, counting every change it makes.
type sink struct {
	cases     []Case
	runID     string
	runIDSeen bool
	file      int
	counts    map[string]int
	order     []string
	opts      *Options
	// afterRead run once every file is read, before the cases are checked.
	afterRead []func()
	lmeval    *lmevalState
	otel      *otelState
	// otelUnscored: no trace was scored; otelScoresNoThreshold: some had
	// scores that need Options.PassThreshold.
	otelUnscored, otelScoresNoThreshold bool
	otelCost                            bool // a trace states a cost (in USD)
}

func newSink() *sink { return &sink{counts: map[string]int{}, opts: &Options{}} }

func (s *sink) beginFile() { s.file++ }

// warn counts one occurrence of a warning.
func (s *sink) warn(w string) { s.warnN(w, 1) }

func (s *sink) warnN(w string, n int) {
	if n <= 0 {
		return
	}
	if _, ok := s.counts[w]; !ok {
		s.order = append(s.order, w)
	}
	s.counts[w] += n
}

func (s *sink) warnings() []string {
	out := make([]string, len(s.order))
	for i, w := range s.order {
		out[i] = fmt.Sprintf(w, s.counts[w])
	}
	return out
}

// setRunID records the tool's own run id. Files naming different runs leave
// the run id to be derived.
func (s *sink) setRunID(raw string) {
	if raw == "" {
		return
	}
	id, changed := fitID(raw, "", maxIDLen)
	if changed {
		s.warn(warnRunIDRewritten)
	}
	switch {
	case !s.runIDSeen:
		s.runID, s.runIDSeen = id, true
	case s.runID != id && s.runID != "":
		s.runID = ""
		s.warn(warnRunIDsDisagree)
	}
}

// caseID fits a tool's identifier to the case_id pattern, keeping suffix
// (for example ":e2", built by the converter and already valid) whole.
func (s *sink) caseID(raw, suffix string) string {
	if raw == "" {
		s.warn(warnIDEmpty)
		raw = strconv.Itoa(len(s.cases) + 1)
	}
	id, changed := fitID(raw, suffix, maxIDLen)
	if changed {
		s.warn(warnIDRewritten)
	}
	return id
}

// check returns a tool check with its name fitted to the pattern.
func (s *sink) check(name string, passed bool) ToolCheck {
	if name == "" {
		s.warn(warnCheckNameEmpty)
		name = "check"
	}
	fitted, changed := fitID(name, "", maxCheckNameLen)
	if changed {
		s.warn(warnCheckRenamed)
	}
	return ToolCheck{Name: fitted, Passed: passed}
}

// tokens returns a reported token count, or nil when v is not a usable one.
func (s *sink) tokens(v float64) *int64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v != math.Trunc(v) {
		s.warn(warnBadTokens)
		return nil
	}
	if v > maxTokens {
		s.warn(warnManyTokens)
		v = maxTokens
	}
	n := int64(v)
	return &n
}

// add fits a case's numbers to their bounds and keeps it. The converter has
// already fitted its ids with caseID and its check names with check.
func (s *sink) add(c Case) {
	switch {
	case math.IsNaN(c.LatencyMS) || math.IsInf(c.LatencyMS, 0) || c.LatencyMS < 0:
		s.warn(warnBadLatency)
		c.LatencyMS = 0
	case c.LatencyMS > maxLatencyMS:
		s.warn(warnLongLatency)
		c.LatencyMS = maxLatencyMS
	}
	for _, p := range []**int64{&c.InputTokens, &c.OutputTokens} {
		if *p != nil && (**p < 0) {
			s.warn(warnBadTokens)
			*p = nil
		} else if *p != nil && **p > maxTokens {
			s.warn(warnManyTokens)
			v := int64(maxTokens)
			*p = &v
		}
	}
	if c.Cost != nil {
		switch v := *c.Cost; {
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			s.warn(warnBadCost)
			c.Cost = nil
		case v > maxCost:
			s.warn(warnHighCost)
			capped := float64(maxCost)
			c.Cost = &capped
		}
	}
	if len(c.ToolChecks) > maxToolChecks {
		s.warnN(warnChecksDropped, len(c.ToolChecks)-maxToolChecks)
		c.ToolChecks = c.ToolChecks[:maxToolChecks:maxToolChecks]
	}
	if t := c.Trace; t != nil {
		for _, n := range []*int{&t.ExpectedSteps, &t.ObservedSteps} {
			if *n < 0 {
				*n = 0
			}
			if *n > maxSteps {
				s.warn(warnStepsCapped)
				*n = maxSteps
			}
		}
		if t.ObservedSteps > t.ExpectedSteps {
			s.warn(warnObservedCapped)
			t.ObservedSteps = t.ExpectedSteps
		}
	}
	s.cases = append(s.cases, c)
}

// usable refuses results that cannot make a request.
func (s *sink) usable(format string, split bool) error {
	switch n := len(s.cases); {
	case n == 0:
		return &UnusableError{
			Reason: "no case to report",
			Hint:   "the " + format + " results hold no case that ran; check that this is the tool's results file of a finished run",
		}
	case n > MaxCases && !split:
		return &UnusableError{
			Reason: fmt.Sprintf("%d cases, more than the %d one request may hold", n, MaxCases),
			Hint:   "convert fewer files at a time, or let evalmeter submit --split post them in parts",
		}
	}
	return nil
}

// finish hashes the ids when key is set and makes the case ids unique.
func (s *sink) finish(key []byte) {
	if key != nil {
		for i := range s.cases {
			c := &s.cases[i]
			c.ID = hashID(key, c.ID)
			if c.RepeatGroup != "" {
				c.RepeatGroup = hashID(key, c.RepeatGroup)
			}
		}
	}
	seen := make(map[string]bool, len(s.cases))
	for _, c := range s.cases {
		seen[c.ID] = true
	}
	taken := make(map[string]bool, len(s.cases))
	for i := range s.cases {
		c := &s.cases[i]
		if !taken[c.ID] {
			taken[c.ID] = true
			continue
		}
		s.warn(warnIDDuplicate)
		for n := 2; ; n++ {
			suffix := ":" + strconv.Itoa(n)
			id, _ := fitID(c.ID, suffix, maxIDLen)
			if !taken[id] && !seen[id] {
				c.ID = id
				taken[id] = true
				break
			}
		}
	}
}

// hashID is a keyed hash of an id: 32 hex characters.
func hashID(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// fitID fits raw to ^[A-Za-z0-9][A-Za-z0-9._:-]{0,max-1}$ with suffix
// appended: every other character becomes '-', a leading '.', '_', ':' or
// '-' gets the prefix 'c', and raw is cut so that the whole fits in max.
// It reports whether raw itself had to change (a cut included).
func fitID(raw, suffix string, max int) (string, bool) {
	var b strings.Builder
	b.Grow(len(raw) + 1)
	changed := false
	for _, r := range raw {
		if !(isAlnum(r) || r == '.' || r == '_' || r == ':' || r == '-') {
			r = '-'
			changed = true
		}
		if b.Len() == 0 && !isAlnum(r) {
			b.WriteByte('c')
			changed = true
		}
		b.WriteRune(r)
	}
	id := b.String()
	if limit := max - len(suffix); len(id) > limit {
		id = id[:limit]
		changed = true
	}
	return id + suffix, changed
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
