package convert

import (
	"math"
	"strconv"
	"strings"
)

// promptfoo results: the file of `promptfoo eval -o out.json`
// (promptfoo/promptfoo, src/types/index.ts: OutputFile, EvaluateSummaryV2
// and V3, EvaluateResult, GradingResult; src/types/shared.ts: TokenUsage).
//
// Three layouts are read. Version 1 wrote the summary itself: {version: 1,
// results: [...], table, stats}. Later releases wrap the summary as
// {evalId, results: {version, results: [...], stats, ...}, config,
// shareableUrl, metadata}: version 2 keeps a table beside the results,
// version 3 the prompts; releases before evalId wrapped version 1 and 2 the
// same way. `promptfoo export` files wrap it as well and are read alike.
//
// Of a result only id, testIdx and promptIdx (testCaseIdx in early version
// 3), success, failureReason, error, latencyMs, cost, tokenUsage.prompt and
// .completion, response.tokenUsage.prompt and .completion, and the top-level
// gradingResult.componentResults[].pass and .assertion.type or .metric are
// read; error only to look for "timed out". Prompts, vars, outputs, the test
// case, grading reasons, metadata, the table and the config are skipped; so
// are the assertions' tokens (tokenUsage.assertions, gradingResult.tokensUsed),
// which are the grader's, and a tokenUsage with only a total.
//
// Where the rules are silent: the result's own counts, when it has either,
// are taken as a pair and never mixed with the response's; counts that are
// all zero are promptfoo's default, not a report; a result with
// neither id nor both indexes is named by its place in the conversion; a
// component without pass is no check, and an assert-set's own components
// are not read; an empty error is none.

// promptfooFailureError is ResultFailureReason.ERROR.
const promptfooFailureError = 2

// promptfooMaxIdx bounds the indexes an id is built from; others count as missing.
const promptfooMaxIdx = 1 << 40

// promptfooTokens is a token pair as read, before the sink checks it.
type promptfooTokens struct {
	prompt, completion       float64
	hasPrompt, hasCompletion bool
}

// reported: promptfoo starts every result's tokenUsage at zero, so counts
// that are all zero are its default, not a report of the provider's.
func (t promptfooTokens) reported() bool {
	return t.hasPrompt && t.prompt != 0 || t.hasCompletion && t.completion != 0
}

// promptfooResult is what one EvaluateResult says about its case.
type promptfooResult struct {
	id                 string
	testIdx, promptIdx int64 // -1 when missing
	success            bool
	failureReason      float64
	hasError, timedOut bool
	hasGrading         bool
	latency            float64
	hasLatency         bool
	cost               *float64
	tokens, respTokens promptfooTokens
	checks             []ToolCheck
	dropped            int // components beyond maxToolChecks
}

func readPromptfoo(path string, s *sink) error {
	j, f, err := openJSONObject(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// found: a results list was read; summary: a member that a promptfoo
	// summary has beside its results (version, stats, table, timestamp).
	var found, summary bool
	err = j.object(func(name string) error {
		switch name {
		case "evalId":
			id, _, err := j.id()
			s.setRunID(id)
			return err
		case "version", "stats", "table":
			summary = true
		case "results":
			switch j.kind() {
			case '[': // version 1
				found = true
				return readPromptfooResults(j, s)
			case '{':
				return j.object(func(name string) error {
					switch name {
					case "results":
						if j.kind() != '[' {
							return j.skip()
						}
						found = true
						return readPromptfooResults(j, s)
					case "version", "stats", "table", "timestamp":
						summary = true
					}
					return j.skip()
				})
			}
		}
		return j.skip()
	})
	if err != nil {
		return err
	}
	if err := j.end(); err != nil {
		return err
	}
	if !found || !summary {
		return errNotFormat
	}
	return nil
}

// readPromptfooResults reads a list of EvaluateResult, one case each.
func readPromptfooResults(j *jsonReader, s *sink) error {
	return j.array(func(int) error {
		if j.kind() != '{' {
			return j.skip()
		}
		r := promptfooResult{testIdx: -1, promptIdx: -1}
		if err := j.object(func(name string) error { return readPromptfooMember(j, s, &r, name) }); err != nil {
			return err
		}
		s.add(r.toCase(s))
		return nil
	})
}

func readPromptfooMember(j *jsonReader, s *sink, r *promptfooResult, name string) error {
	switch name {
	case "id":
		v, _, err := j.id()
		r.id = v
		return err
	case "testIdx", "testCaseIdx":
		v, ok, err := j.number()
		if ok {
			r.testIdx = promptfooIdx(v)
		}
		return err
	case "promptIdx":
		v, ok, err := j.number()
		if ok {
			r.promptIdx = promptfooIdx(v)
		}
		return err
	case "success":
		v, _, err := j.boolean()
		r.success = v
		return err
	case "failureReason":
		v, _, err := j.number()
		r.failureReason = v
		return err
	case "error":
		return readPromptfooError(j, r)
	case "latencyMs":
		v, ok, err := j.number()
		r.latency, r.hasLatency = v, ok
		return err
	case "cost":
		v, ok, err := j.number()
		if ok {
			r.cost = &v
		}
		return err
	case "tokenUsage":
		return readPromptfooTokens(j, &r.tokens)
	case "response":
		return j.object(func(name string) error {
			if name == "tokenUsage" {
				return readPromptfooTokens(j, &r.respTokens)
			}
			return j.skip()
		})
	case "gradingResult":
		if j.kind() != '{' {
			return j.skip() // null: no grading result
		}
		r.hasGrading = true
		return j.object(func(name string) error {
			if name != "componentResults" {
				return j.skip()
			}
			return j.array(func(int) error {
				if len(r.checks) == maxToolChecks {
					// Beyond what a case keeps: counted, not held.
					r.dropped++
					return j.skip()
				}
				check, ok, err := readPromptfooComponent(j, s)
				if ok {
					r.checks = append(r.checks, check)
				}
				return err
			})
		})
	}
	return j.skip()
}

// readPromptfooError notes whether the result has an error and whether it
// timed out. It is the one place a free-text string is decoded: the text is
// searched and dropped, never kept, printed or returned.
func readPromptfooError(j *jsonReader, r *promptfooResult) error {
	switch j.kind() {
	case '"':
		text, _, err := j.str()
		if text != "" {
			r.hasError = true
			r.timedOut = strings.Contains(strings.ToLower(text), "timed out")
		}
		return err
	case '{':
		r.hasError = true
	}
	return j.skip()
}

// readPromptfooTokens reads the prompt and completion counts of a TokenUsage.
func readPromptfooTokens(j *jsonReader, t *promptfooTokens) error {
	return j.object(func(name string) error {
		var err error
		switch name {
		case "prompt":
			t.prompt, t.hasPrompt, err = j.number()
		case "completion":
			t.completion, t.hasCompletion, err = j.number()
		default:
			err = j.skip()
		}
		return err
	})
}

// readPromptfooComponent reads one component GradingResult as a check; its
// own componentResults (an assert-set's) are skipped. ok is false for a
// component without a pass.
func readPromptfooComponent(j *jsonReader, s *sink) (check ToolCheck, ok bool, err error) {
	if j.kind() != '{' {
		return check, false, j.skip()
	}
	var typ, metric string
	var pass, hasPass bool
	err = j.object(func(name string) error {
		var err error
		switch name {
		case "pass":
			pass, hasPass, err = j.boolean()
		case "assertion":
			err = j.object(func(name string) error {
				var err error
				switch name {
				case "type":
					typ, _, err = j.str()
				case "metric":
					metric, _, err = j.str()
				default:
					err = j.skip()
				}
				return err
			})
		default:
			err = j.skip()
		}
		return err
	})
	if err != nil || !hasPass {
		return check, false, err
	}
	name := typ
	if name == "" {
		name = metric
	}
	return s.check(name, pass), true, nil
}

func (r *promptfooResult) toCase(s *sink) Case {
	c := Case{Cost: r.cost, ToolChecks: r.checks}
	s.warnN(warnChecksDropped, r.dropped)
	switch {
	case r.success:
		c.Status = Pass
	case r.failureReason == promptfooFailureError || r.hasError && !r.hasGrading:
		c.Status = Error
		if r.timedOut {
			c.Status = Timeout
		}
	default:
		c.Status = Fail
	}

	switch {
	case r.id != "":
		c.ID = s.caseID(r.id, "")
	case r.testIdx >= 0 && r.promptIdx >= 0:
		c.ID = s.caseID("t"+strconv.FormatInt(r.testIdx, 10)+"-p"+strconv.FormatInt(r.promptIdx, 10), "")
	default:
		c.ID = s.caseID("", "") // the position
	}

	if r.hasLatency {
		c.LatencyMS = r.latency
	} else {
		s.warn(warnNoLatency)
	}

	tokens := r.tokens
	if !tokens.reported() {
		tokens = r.respTokens
	}
	if !tokens.reported() {
		return c
	}
	if tokens.hasPrompt {
		c.InputTokens = s.tokens(tokens.prompt)
	}
	if tokens.hasCompletion {
		c.OutputTokens = s.tokens(tokens.completion)
	}
	return c
}

// promptfooIdx returns an index as an integer, or -1 when it is not one.
func promptfooIdx(v float64) int64 {
	if v < 0 || v > promptfooMaxIdx || v != math.Trunc(v) {
		return -1
	}
	return int64(v)
}

// looksPromptfoo knows the wrapped summary (versions 2 and 3, and 1 in the
// releases between) by its results' own results list beside a version or
// stats, and the bare version 1 summary by its results list beside a table.
func looksPromptfoo(sh *shape) bool {
	if sh.subHas("results", "results") && (sh.subHas("results", "version") || sh.subHas("results", "stats")) {
		return sh.has("evalId") || sh.has("config") || sh.has("shareableUrl")
	}
	return sh.has("results", "table") && !sh.subHas("results") && (sh.has("version") || sh.has("stats"))
}
