package convert

import (
	"math"
	"strconv"
	"strings"
)

// OpenTelemetry traces saved as OTLP JSON (opentelemetry-proto's JSON
// encoding): the JSON lines of the Collector's file exporter, one TracesData
// per line, or one such document. Keys are read in lowerCamelCase, as the
// encoding specifies, and in snake_case, which the Collector accepts too.
// Spans are read with the GenAI semantic conventions (gen_ai.*, v1.26 to
// v1.41, before and after the token renames of v1.27) and OpenInference's
// (Arize Phoenix).
//
// A case is a trace, keyed by its root span: the case id is the value of
// Options.CaseAttribute on the trace's spans (the root's first), else the
// trace id, which differs between runs. Of a span only these are read:
// trace, span and parent ids, start and end times, status code, and the
// values of the attributes named below. Every other attribute value, the
// span's name, its status message, its links, its events but the
// evaluation results' name, score and label, and the resource's and scope's
// attributes are skipped unread: prompts, completions, messages, tool
// arguments and results live there.
//
//   - status: the trace's evaluation results decide, every one must pass:
//     gen_ai.evaluation.result events (gen_ai.evaluation.score.label, else
//     gen_ai.evaluation.score.value) and OpenInference's flattened
//     annotations.N.annotation.* and evaluations.N.evaluation.* (label,
//     score). A label of pass, passed, true, correct, yes or success passes,
//     fail, failed, false, incorrect, no or failure fails; a score counts
//     only with Options.PassThreshold. Without an evaluation, a root span
//     with status ERROR is an error, a timeout when its error.type is
//     timeout; a trace that is neither is unscored, sent as an error and
//     counted, and results with no scored trace at all are refused.
//   - latency: the root span's duration.
//   - tokens: gen_ai.usage.input_tokens and output_tokens (before v1.27
//     prompt_tokens and completion_tokens), llm.token_count.prompt and
//     completion, summed over the spans that carry them but for a span whose
//     child carries them too: it counts its children again.
//   - cost: OpenInference's llm.cost.total, in USD, summed likewise.
//   - tool checks: execute_tool spans (gen_ai.operation.name) and
//     OpenInference TOOL spans, named by gen_ai.tool.name or tool.name,
//     passed unless their status is ERROR.
//   - trace: observed_steps counts the tool and model spans (chat,
//     text_completion, generate_content; OpenInference LLM);
//     expected_steps is Options.ExpectedStepsAttribute's value, and without
//     it the trace is not sent.

// otelSpan is what is kept of one span: ids and numbers.
type otelSpan struct {
	spanID, parentID string
	start, end       float64 // Unix nanoseconds
	status           int     // 0 unset, 1 ok, 2 error
	timeout          bool    // error.type is timeout
	model, tool      bool
	toolName         string
	inTokens         *float64
	outTokens        *float64
	cost             *float64
	caseID, repeat   string
	expected         *float64
	outcomes         []otelOutcome
	childHasTokens   bool
	childHasCost     bool
}

func (sp *otelSpan) hasTokens() bool { return sp.inTokens != nil || sp.outTokens != nil }

// otelOutcome is one evaluation result: a label, a score, or both.
type otelOutcome struct {
	index string // of OpenInference's flattened evaluations
	label string
	score *float64
}

// otelTrace is the spans of one trace, in the order read.
type otelTrace struct {
	id    string
	spans []*otelSpan
}

// otelState is what the reader keeps across the files of one conversion.
type otelState struct {
	traces map[string]*otelTrace
	order  []*otelTrace
}

func readOtel(path string, s *sink) error {
	j, f, err := openJSON(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if s.otel == nil {
		s.otel = &otelState{traces: map[string]*otelTrace{}}
		s.afterRead = append(s.afterRead, func() { s.otel.cases(s) })
	}
	docs := 0
	for j.kind() == '{' {
		found := false
		err := j.object(func(name string) error {
			switch name {
			case "resourceSpans", "resource_spans":
				found = true
				return j.array(func(int) error { return s.otel.resourceSpans(j, s) })
			}
			return j.skip()
		})
		if err != nil {
			return err
		}
		if !found && docs == 0 {
			return errNotFormat
		}
		docs++
	}
	if docs == 0 {
		return errNotFormat
	}
	return j.end()
}

func (st *otelState) resourceSpans(j *jsonReader, s *sink) error {
	return j.object(func(name string) error {
		switch name {
		case "scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans":
			return j.array(func(int) error {
				return j.object(func(name string) error {
					if name != "spans" {
						return j.skip() // the scope and its attributes
					}
					return j.array(func(int) error { return st.span(j, s) })
				})
			})
		}
		return j.skip() // the resource and its attributes
	})
}

// span reads one span and files it under its trace.
func (st *otelState) span(j *jsonReader, s *sink) error {
	sp := &otelSpan{}
	var traceID string
	var kind string // OpenInference's
	var operation string
	err := j.object(func(name string) error {
		switch name {
		case "traceId", "trace_id":
			v, _, err := j.str()
			traceID = strings.ToLower(v)
			return err
		case "spanId", "span_id":
			v, _, err := j.str()
			sp.spanID = strings.ToLower(v)
			return err
		case "parentSpanId", "parent_span_id":
			v, _, err := j.str()
			sp.parentID = strings.ToLower(v)
			return err
		case "startTimeUnixNano", "start_time_unix_nano":
			v, err := otelInt(j)
			sp.start = v
			return err
		case "endTimeUnixNano", "end_time_unix_nano":
			v, err := otelInt(j)
			sp.end = v
			return err
		case "status":
			return j.object(func(name string) error {
				if name != "code" {
					return j.skip() // the message is free text
				}
				code, err := otelStatusCode(j)
				sp.status = code
				return err
			})
		case "attributes":
			return otelAttributes(j, func(key string) error {
				return readOtelAttribute(j, key, sp, &kind, &operation, s)
			})
		case "events":
			return j.array(func(int) error { return readOtelEvent(j, sp) })
		}
		return j.skip() // name, links, trace state, flags, counts
	})
	if err != nil {
		return err
	}
	switch operation {
	case "chat", "text_completion", "generate_content":
		sp.model = true
	case "execute_tool":
		sp.tool = true
	}
	switch kind {
	case "LLM":
		sp.model = true
	case "TOOL":
		sp.tool = true
	}
	if traceID == "" {
		s.warn(warnOtelNoTrace)
		return nil
	}
	t := st.traces[traceID]
	if t == nil {
		t = &otelTrace{id: traceID}
		st.traces[traceID] = t
		st.order = append(st.order, t)
	}
	t.spans = append(t.spans, sp)
	return nil
}

const (
	warnOtelNoTrace  = "%d spans have no trace id; not read"
	warnOtelUnscored = "%d traces carry no evaluation result and did not fail; sent as error"
)

// otelAttributes calls value for each attribute ({key, value}) of the list
// that comes next, with the value next to read. An attribute written value
// first, which no OTLP encoder does, is skipped.
func otelAttributes(j *jsonReader, value func(key string) error) error {
	return j.array(func(int) error {
		key := ""
		return j.object(func(name string) error {
			switch name {
			case "key":
				v, _, err := j.str()
				key = v
				return err
			case "value":
				if key == "" {
					return j.skip()
				}
				return value(key)
			}
			return j.skip()
		})
	})
}

// otelAny reads an AnyValue's scalar: a string, a number (intValue as text
// or a number, doubleValue) or a boolean. Arrays, lists and bytes are skipped.
func otelAny(j *jsonReader) (str string, num *float64, err error) {
	err = j.object(func(name string) error {
		switch name {
		case "stringValue", "string_value":
			v, _, err := j.str()
			str = v
			return err
		case "intValue", "int_value", "doubleValue", "double_value":
			v, err := otelNumber(j)
			num = v
			return err
		case "boolValue", "bool_value":
			v, ok, err := j.boolean()
			if ok {
				f := 0.0
				if v {
					f = 1
				}
				num = &f
			}
			return err
		}
		return j.skip()
	})
	return str, num, err
}

// otelNumber reads a number written as a number or as its decimal text.
func otelNumber(j *jsonReader) (*float64, error) {
	if j.kind() == '"' {
		return j.shortNumberString()
	}
	v, ok, err := j.number()
	if !ok {
		return nil, err
	}
	return &v, err
}

func otelInt(j *jsonReader) (float64, error) {
	v, err := otelNumber(j)
	if v == nil {
		return 0, err
	}
	return *v, err
}

// otelStatusCode reads a status code: 0, 1, 2, or their names.
func otelStatusCode(j *jsonReader) (int, error) {
	if j.kind() == '"' {
		v, _, err := j.str()
		switch v {
		case "STATUS_CODE_OK", "OK", "1":
			return 1, err
		case "STATUS_CODE_ERROR", "ERROR", "2":
			return 2, err
		}
		return 0, err
	}
	v, ok, err := j.number()
	if !ok {
		return 0, err
	}
	return int(v), err
}

// readOtelAttribute reads the value of an attribute the converter uses and
// skips every other one unread.
func readOtelAttribute(j *jsonReader, key string, sp *otelSpan, kind, operation *string, s *sink) error {
	o := s.opts
	switch {
	case otelContent(key): // never read, even when named as a case's attribute
		return j.skip()
	case key == "gen_ai.operation.name":
		v, _, err := otelAny(j)
		*operation = v
		return err
	case key == "openinference.span.kind":
		v, _, err := otelAny(j)
		*kind = strings.ToUpper(v)
		return err
	case key == "gen_ai.tool.name" || key == "tool.name":
		v, _, err := otelAny(j)
		if sp.toolName == "" {
			sp.toolName = v
		}
		return err
	case key == "error.type":
		v, _, err := otelAny(j)
		sp.timeout = sp.timeout || v == "timeout"
		return err
	case key == "gen_ai.usage.input_tokens" || key == "gen_ai.usage.prompt_tokens" || key == "llm.token_count.prompt":
		_, v, err := otelAny(j)
		if v != nil && sp.inTokens == nil {
			sp.inTokens = v
		}
		return err
	case key == "gen_ai.usage.output_tokens" || key == "gen_ai.usage.completion_tokens" || key == "llm.token_count.completion":
		_, v, err := otelAny(j)
		if v != nil && sp.outTokens == nil {
			sp.outTokens = v
		}
		return err
	case key == "llm.cost.total":
		_, v, err := otelAny(j)
		sp.cost = v
		return err
	case o.CaseAttribute != "" && key == o.CaseAttribute:
		v, n, err := otelAny(j)
		sp.caseID = otelIDText(v, n)
		return err
	case o.RepeatAttribute != "" && key == o.RepeatAttribute:
		v, n, err := otelAny(j)
		sp.repeat = otelIDText(v, n)
		return err
	case o.ExpectedStepsAttribute != "" && key == o.ExpectedStepsAttribute:
		_, v, err := otelAny(j)
		sp.expected = v
		return err
	}
	// OpenInference's flattened evaluations: annotations.N.annotation.label,
	// evaluations.N.evaluation.score, with the trace. prefix too.
	if idx, field, ok := otelEvaluationKey(key); ok && (field == "label" || field == "score") {
		v, n, err := otelAny(j)
		o := otelOutcomeAt(sp, idx)
		if field == "label" {
			o.label = v
		} else {
			o.score = n
		}
		return err
	}
	return j.skip()
}

// otelContent reports whether an attribute holds content the conventions
// define: prompts, completions, messages, instructions, tool arguments and
// results, inputs and outputs.
func otelContent(key string) bool {
	switch key {
	case "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
		"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.tool.definitions", "gen_ai.prompt", "gen_ai.completion",
		"gen_ai.evaluation.explanation", "input.value", "output.value", "tool.parameters", "tool.description", "llm.prompts":
		return true
	}
	for _, prefix := range []string{"llm.input_messages.", "llm.output_messages.", "llm.prompt_template.", "llm.tools.", "retrieval.documents.", "reranker.", "embedding.embeddings.", "message.", "exception."} {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return strings.HasSuffix(key, ".explanation")
}

// otelEvaluationKey splits annotations.N.annotation.FIELD (or
// evaluations.N.evaluation.FIELD, with a trace. prefix or not) into the
// evaluation's index and the field.
func otelEvaluationKey(key string) (idx, field string, ok bool) {
	key = strings.TrimPrefix(key, "trace.")
	for _, k := range []string{"annotation", "evaluation"} {
		rest, found := strings.CutPrefix(key, k+"s.")
		if !found {
			continue
		}
		n, rest, found := strings.Cut(rest, ".")
		if !found || n == "" || strings.Trim(n, "0123456789") != "" {
			return "", "", false
		}
		field, found = strings.CutPrefix(rest, k+".")
		return key[:len(k)+2+len(n)], field, found
	}
	return "", "", false
}

// otelOutcomeAt is the span's evaluation of index idx, added when new.
func otelOutcomeAt(sp *otelSpan, idx string) *otelOutcome {
	for i := range sp.outcomes {
		if sp.outcomes[i].index == idx {
			return &sp.outcomes[i]
		}
	}
	sp.outcomes = append(sp.outcomes, otelOutcome{index: idx})
	return &sp.outcomes[len(sp.outcomes)-1]
}

func otelIDText(s string, n *float64) string {
	if s != "" || n == nil {
		return s
	}
	return strconv.FormatFloat(*n, 'f', -1, 64)
}

// readOtelEvent reads an event: of a gen_ai.evaluation.result, its score
// and label; of any other event, nothing.
func readOtelEvent(j *jsonReader, sp *otelSpan) error {
	var isEval bool
	var out otelOutcome
	err := j.object(func(name string) error {
		switch name {
		case "name":
			is, _, err := j.stringIs("gen_ai.evaluation.result")
			isEval = is
			return err
		case "attributes":
			return otelAttributes(j, func(key string) error {
				switch key {
				case "gen_ai.evaluation.score.label":
					v, _, err := otelAny(j)
					out.label = v
					return err
				case "gen_ai.evaluation.score.value":
					_, v, err := otelAny(j)
					out.score = v
					return err
				}
				return j.skip() // the explanation, and every other event's attributes
			})
		}
		return j.skip()
	})
	if err == nil && isEval && (out.label != "" || out.score != nil) {
		sp.outcomes = append(sp.outcomes, out)
	}
	return err
}

// cases makes a case of each trace, once every file is read.
func (st *otelState) cases(s *sink) {
	scored := 0
	for _, t := range st.order {
		c, ok := st.traceCase(t, s)
		if ok {
			scored++
		}
		s.add(c)
	}
	if len(st.order) > 0 && scored == 0 {
		s.otelUnscored = true
	}
}

// traceCase is the case of one trace, and whether it was scored (an
// evaluation, or a failure).
func (st *otelState) traceCase(t *otelTrace, s *sink) (Case, bool) {
	byID := make(map[string]*otelSpan, len(t.spans))
	for _, sp := range t.spans {
		byID[sp.spanID] = sp
	}
	// The root: the earliest span whose parent is not in the trace.
	root := t.spans[0] // when every span has a parent in the trace (a cycle)
	rootFound := false
	for _, sp := range t.spans {
		if p := byID[sp.parentID]; sp.parentID != "" && p != nil && p != sp {
			if sp.hasTokens() {
				p.childHasTokens = true
			}
			if sp.cost != nil {
				p.childHasCost = true
			}
			continue
		}
		if !rootFound || sp.start < root.start {
			root, rootFound = sp, true
		}
	}
	c := Case{}
	var in, out, cost float64
	var hasIn, hasOut, hasCost bool
	var caseID, repeat string
	var expected *float64
	observed := 0
	var outcomes []otelOutcome
	spans := append([]*otelSpan{root}, t.spans...) // the root's attributes first
	for i, sp := range spans {
		if i > 0 && sp == root {
			continue
		}
		if caseID == "" {
			caseID = sp.caseID
		}
		if repeat == "" {
			repeat = sp.repeat
		}
		if expected == nil {
			expected = sp.expected
		}
		if sp.hasTokens() && !sp.childHasTokens {
			if sp.inTokens != nil {
				in, hasIn = in+*sp.inTokens, true
			}
			if sp.outTokens != nil {
				out, hasOut = out+*sp.outTokens, true
			}
		}
		if sp.cost != nil && !sp.childHasCost {
			cost, hasCost = cost+*sp.cost, true
		}
		if sp.tool {
			c.ToolChecks = append(c.ToolChecks, s.check(sp.toolName, sp.status != 2))
		}
		if sp.tool || sp.model {
			observed++
		}
		outcomes = append(outcomes, sp.outcomes...)
	}
	c.LatencyMS = (root.end - root.start) / 1e6
	if hasIn {
		c.InputTokens = s.tokens(in)
	}
	if hasOut {
		c.OutputTokens = s.tokens(out)
	}
	if hasCost {
		c.Cost = &cost
		s.otelCost = true
	}
	if expected != nil && *expected >= 0 && *expected == math.Trunc(*expected) && *expected <= maxSteps {
		c.Trace = &Trace{ExpectedSteps: int(*expected), ObservedSteps: observed}
	}
	if caseID == "" {
		caseID = t.id
	}
	c.ID = s.caseID(caseID, "")
	if repeat != "" {
		c.RepeatGroup, _ = fitID(repeat, "", maxIDLen)
	}

	status, scored := otelStatus(outcomes, s)
	switch {
	case scored:
		c.Status = status
	case root.status == 2 && root.timeout:
		c.Status, scored = Timeout, true
	case root.status == 2:
		c.Status, scored = Error, true
	default:
		s.warn(warnOtelUnscored)
		c.Status = Error
	}
	return c, scored
}

// otelStatus decides a trace's status from its evaluation results: every
// one that decides must pass.
func otelStatus(outcomes []otelOutcome, s *sink) (Status, bool) {
	decided, passed := false, true
	for _, o := range outcomes {
		switch strings.ToLower(strings.TrimSpace(o.label)) {
		case "pass", "passed", "true", "correct", "yes", "success":
			decided = true
			continue
		case "fail", "failed", "false", "incorrect", "no", "failure":
			decided, passed = true, false
			continue
		}
		if o.score == nil {
			continue
		}
		if t := s.opts.PassThreshold; t != nil {
			decided = true
			passed = passed && *o.score >= *t
		} else {
			s.otelScoresNoThreshold = true
		}
	}
	if !decided {
		return "", false
	}
	if passed {
		return Pass, true
	}
	return Fail, true
}

// otelUsable refuses traces that none of which is scored.
func (s *sink) otelUsable() error {
	if s.otelCost && s.opts.Currency != "" && s.opts.Currency != "USD" {
		return &UnusableError{
			Reason: "the traces state costs in USD (llm.cost.total), not " + s.opts.Currency,
			Hint:   "convert them with --currency USD",
		}
	}
	if !s.otelUnscored {
		return nil
	}
	if s.otelScoresNoThreshold {
		return &UnusableError{
			Reason: "the traces' evaluation results are scores, with no pass or fail label",
			Hint:   "give --pass-threshold T to count a score of at least T as a pass",
		}
	}
	return &UnusableError{
		Reason: "no trace carries an evaluation result (gen_ai.evaluation.result events, or OpenInference annotations) and none failed",
		Hint:   "record the evaluation of each run on its trace, or convert the results file of the tool that scores them",
	}
}

// looksOtel knows OTLP JSON by its resourceSpans.
func looksOtel(sh *shape) bool { return sh.has("resourceSpans") || sh.has("resource_spans") }
