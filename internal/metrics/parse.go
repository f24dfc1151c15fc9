package metrics

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// maxDepth bounds nesting, as encoding/json does, so that unknown members
// cannot exhaust the stack.
const maxDepth = 10000

// What each field must be; a failing field's message is its path and its rule.
const (
	ruleID         = "must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-', starting with a letter or digit"
	ruleToolName   = "must be 1 to 80 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-', starting with a letter or digit"
	ruleCurrency   = "must be one of EUR, USD, GBP"
	ruleCases      = "must be an array of 1 to 500 case objects"
	ruleCase       = "must be a case object"
	ruleStatus     = "must be one of pass, fail, error, timeout"
	ruleLatency    = "must be a number from 0 to 86400000"
	ruleTokens     = "must be an integer from 0 to 1000000000"
	ruleCost       = "must be a number from 0 to 1000000"
	ruleToolChecks = "must be an array of at most 32 tool check objects"
	ruleToolCheck  = "must be a tool check object with name and passed"
	rulePassed     = "must be true or false"
	ruleViolations = "must be an array of at most 32 boundary violation codes"
	ruleViolation  = "must be one of scope_escape, unauthorized_tool, data_boundary, policy_boundary, instruction_override"
	ruleTrace      = "must be a trace object with expected_steps and observed_steps"
	ruleSteps      = "must be an integer from 0 to 100000"
	ruleObserved   = "must not exceed expected_steps"
	ruleDuplicate  = "repeats the case_id of an earlier case; each case must be reported once"
	ruleUnknown    = "is not a field of the metrics request (objects are closed; see the schema)"
	ruleRequired   = "is required"
	ruleCurrencyIf = "is required when any case reports cost"
)

// minCaseBytes is the size of the smallest valid case, to size the case
// slice from the body once.
const minCaseBytes = len(`{"case_id":"a","status":"pass","latency_ms":0}`)

// Parse reads and validates a metrics request. A body that is not I-JSON
// (RFC 7493: malformed, invalid UTF-8, duplicate names, trailing data) fails
// with CodeMalformedJSON; a well-formed body that breaks the schema fails
// with the first offending place in document order. A missing member is
// found at the end of its object, and the cost_currency rule at the end of
// the request.
func Parse(body []byte) (*Request, error) {
	p := parser{data: body, req: &Request{}}
	if err := p.document(); err != nil {
		return nil, err
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.req, nil
}

type parser struct {
	data    []byte
	pos     int
	depth   int
	err     *Error // first schema error
	req     *Request
	ids     *byteSet // case_ids seen
	anyCost bool
}

func (p *parser) document() error {
	p.skipSpace()
	switch {
	case p.pos == len(p.data):
		return p.syntaxError("the body is empty; send a JSON object")
	case p.data[p.pos] == 0xEF:
		return p.syntaxError("the body starts with a byte order mark; send UTF-8 without one")
	case p.data[p.pos] == '{':
		if err := p.request(); err != nil {
			return err
		}
	default:
		if err := p.skip(); err != nil {
			return err
		}
		p.fail(CodeInvalidField, place{kase: -1, item: -1}, "the body must be a JSON object")
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return p.syntaxError("unexpected data after the JSON value")
	}
	return nil
}

// Known members of each object, as bits of a seen-set.
const (
	memberRunID uint32 = 1 << iota
	memberCostCurrency
	memberCases
)

const (
	memberCaseID uint32 = 1 << iota
	memberStatus
	memberLatency
	memberRepeatGroup
	memberInput
	memberOutput
	memberCost
	memberToolChecks
	memberViolations
	memberTrace
)

const (
	memberName uint32 = 1 << iota
	memberPassed
)

const (
	memberExpected uint32 = 1 << iota
	memberObserved
)

func (p *parser) request() error {
	r := p.req
	seen, err := p.object(func(name []byte) (uint32, error) {
		switch string(name) {
		case "run_id":
			v, ok, err := p.str(top("run_id"), ruleID)
			if ok && !validID(v, MaxIDLength) {
				p.fail(CodeInvalidField, top("run_id"), ruleID)
			}
			r.runID = v
			return memberRunID, err
		case "cost_currency":
			v, ok, err := p.str(top("cost_currency"), ruleCurrency)
			if ok && !validCurrency(v) {
				p.fail(CodeInvalidField, top("cost_currency"), ruleCurrency)
			}
			r.costCurrency = v
			return memberCostCurrency, err
		case "cases":
			return memberCases, p.cases()
		}
		return 0, p.unknown(top(string(name)))
	})
	if err != nil {
		return err
	}
	if seen&memberRunID == 0 {
		p.fail(CodeMissingField, top("run_id"), ruleRequired)
	}
	if seen&memberCases == 0 {
		p.fail(CodeMissingField, top("cases"), ruleRequired)
	}
	if seen&memberCostCurrency == 0 && p.anyCost {
		p.fail(CodeMissingField, top("cost_currency"), ruleCurrencyIf)
	}
	return nil
}

func (p *parser) cases() error {
	if p.peek() != '[' {
		return p.wrongType(top("cases"), ruleCases)
	}
	if p.req.cases == nil {
		p.req.cases = make([]observation, 0, min(MaxCases, len(p.data)/minCaseBytes+1))
		p.ids = newByteSet(cap(p.req.cases))
	}
	n, err := p.array(func(i int) error {
		if i >= MaxCases {
			p.fail(CodeInvalidField, top("cases"), ruleCases)
			return p.skip()
		}
		return p.observation(i)
	})
	if err == nil && n == 0 {
		p.fail(CodeInvalidField, top("cases"), ruleCases)
	}
	return err
}

func (p *parser) observation(i int) error {
	if p.peek() != '{' {
		return p.wrongType(place{kase: i, item: -1}, ruleCase)
	}
	r := p.req
	r.cases = append(r.cases, observation{})
	c := &r.cases[len(r.cases)-1]
	at := func(name string) place { return place{kase: i, item: -1, name: name} }

	seen, err := p.object(func(name []byte) (uint32, error) {
		switch string(name) {
		case "case_id":
			v, ok, err := p.str(at("case_id"), ruleID)
			if ok {
				p.caseID(v, at("case_id"))
			}
			c.id = v
			return memberCaseID, err
		case "status":
			v, ok, err := p.str(at("status"), ruleStatus)
			if ok {
				if c.status, ok = parseStatus(v); !ok {
					p.fail(CodeInvalidField, at("status"), ruleStatus)
				}
			}
			return memberStatus, err
		case "latency_ms":
			n, _, err := p.num(at("latency_ms"), MaxLatencyMS, false, ruleLatency)
			c.latency = n
			return memberLatency, err
		case "repeat_group":
			v, ok, err := p.str(at("repeat_group"), ruleID)
			if ok && !validID(v, MaxIDLength) {
				p.fail(CodeInvalidField, at("repeat_group"), ruleID)
			}
			c.repeatGroup = v
			c.has |= hasRepeatGroup
			return memberRepeatGroup, err
		case "input_tokens":
			n, _, err := p.num(at("input_tokens"), MaxTokens, true, ruleTokens)
			c.input = int64(n.f)
			c.has |= hasInput
			return memberInput, err
		case "output_tokens":
			n, _, err := p.num(at("output_tokens"), MaxTokens, true, ruleTokens)
			c.output = int64(n.f)
			c.has |= hasOutput
			return memberOutput, err
		case "cost":
			n, _, err := p.num(at("cost"), MaxCost, false, ruleCost)
			c.cost = n
			c.has |= hasCost
			p.anyCost = true
			return memberCost, err
		case "tool_checks":
			c.has |= hasToolChecks
			return memberToolChecks, p.toolChecks(i, c)
		case "boundary_violations":
			c.has |= hasViolations
			return memberViolations, p.violations(i, c)
		case "trace":
			c.has |= hasTrace
			return memberTrace, p.trace(i, c)
		}
		return 0, p.unknown(at(string(name)))
	})
	if err != nil {
		return err
	}
	for _, m := range [...]struct {
		bit  uint32
		name string
	}{{memberCaseID, "case_id"}, {memberStatus, "status"}, {memberLatency, "latency_ms"}} {
		if seen&m.bit == 0 {
			p.fail(CodeMissingField, at(m.name), ruleRequired)
		}
	}
	return nil
}

// caseID checks a case_id's pattern and that no earlier case used it.
func (p *parser) caseID(v []byte, pl place) {
	if !validID(v, MaxIDLength) {
		p.fail(CodeInvalidField, pl, ruleID)
		return
	}
	if p.err != nil {
		return // the request is refused already; spare the bookkeeping
	}
	if _, added := p.ids.add(v); !added {
		p.fail(CodeInvalidField, pl, ruleDuplicate)
	}
}

func (p *parser) toolChecks(i int, c *observation) error {
	list := place{kase: i, group: "tool_checks", item: -1}
	if p.peek() != '[' {
		return p.wrongType(list, ruleToolChecks)
	}
	r := p.req
	start := len(r.toolChecks)
	_, err := p.array(func(j int) error {
		item := place{kase: i, group: "tool_checks", item: j}
		if j >= MaxToolChecks {
			p.fail(CodeInvalidField, list, ruleToolChecks)
			return p.skip()
		}
		if p.peek() != '{' {
			return p.wrongType(item, ruleToolCheck)
		}
		var tc toolCheck
		seen, err := p.object(func(name []byte) (uint32, error) {
			switch string(name) {
			case "name":
				item.name = "name"
				v, ok, err := p.str(item, ruleToolName)
				if ok && !validID(v, MaxToolNameLength) {
					p.fail(CodeInvalidField, item, ruleToolName)
				}
				tc.name = v
				return memberName, err
			case "passed":
				item.name = "passed"
				v, ok, err := p.boolean(item, rulePassed)
				tc.passed = ok && v
				return memberPassed, err
			}
			item.name = string(name)
			return 0, p.unknown(item)
		})
		if err != nil {
			return err
		}
		if seen&memberName == 0 {
			item.name = "name"
			p.fail(CodeMissingField, item, ruleRequired)
		}
		if seen&memberPassed == 0 {
			item.name = "passed"
			p.fail(CodeMissingField, item, ruleRequired)
		}
		r.toolChecks = append(r.toolChecks, tc)
		return nil
	})
	c.checks = span{int32(start), int32(len(r.toolChecks) - start)}
	return err
}

func (p *parser) violations(i int, c *observation) error {
	list := place{kase: i, group: "boundary_violations", item: -1}
	if p.peek() != '[' {
		return p.wrongType(list, ruleViolations)
	}
	r := p.req
	start := len(r.violations)
	_, err := p.array(func(j int) error {
		if j >= MaxViolations {
			p.fail(CodeInvalidField, list, ruleViolations)
			return p.skip()
		}
		item := place{kase: i, group: "boundary_violations", item: j}
		v, ok, err := p.str(item, ruleViolation)
		if ok {
			code, known := parseViolation(v)
			if !known {
				p.fail(CodeInvalidField, item, ruleViolation)
			}
			r.violations = append(r.violations, code)
		}
		return err
	})
	c.reported = span{int32(start), int32(len(r.violations) - start)}
	return err
}

func (p *parser) trace(i int, c *observation) error {
	at := func(name string) place { return place{kase: i, group: "trace", item: -1, name: name} }
	if p.peek() != '{' {
		return p.wrongType(at(""), ruleTrace)
	}
	seen, err := p.object(func(name []byte) (uint32, error) {
		switch string(name) {
		case "expected_steps":
			n, _, err := p.num(at("expected_steps"), MaxSteps, true, ruleSteps)
			c.expected = int64(n.f)
			return memberExpected, err
		case "observed_steps":
			n, _, err := p.num(at("observed_steps"), MaxSteps, true, ruleSteps)
			c.observed = int64(n.f)
			return memberObserved, err
		}
		return 0, p.unknown(at(string(name)))
	})
	if err != nil {
		return err
	}
	switch {
	case seen&memberExpected == 0:
		p.fail(CodeMissingField, at("expected_steps"), ruleRequired)
	case seen&memberObserved == 0:
		p.fail(CodeMissingField, at("observed_steps"), ruleRequired)
	case c.observed > c.expected:
		p.fail(CodeInvalidField, at("observed_steps"), ruleObserved)
	}
	return nil
}

// Typed values. Each returns ok=false, with the schema error recorded, when
// the value has the wrong type or is out of range; err is for malformed JSON.

func (p *parser) str(pl place, rule string) (v []byte, ok bool, err error) {
	if p.peek() != '"' {
		return nil, false, p.wrongType(pl, rule)
	}
	v, err = p.readString()
	return v, err == nil, err
}

func (p *parser) num(pl place, max float64, integer bool, rule string) (n number, ok bool, err error) {
	if c := p.peek(); c != '-' && !isDigit(c) {
		return n, false, p.wrongType(pl, rule)
	}
	if n, err = p.readNumber(); err != nil {
		return n, false, err
	}
	if !(n.f >= 0 && n.f <= max) || integer && n.f != math.Trunc(n.f) {
		p.fail(CodeInvalidField, pl, rule)
		return n, false, nil
	}
	return n, true, nil
}

func (p *parser) boolean(pl place, rule string) (v, ok bool, err error) {
	switch p.peek() {
	case 't':
		return true, true, p.literal("true")
	case 'f':
		return false, true, p.literal("false")
	}
	return false, false, p.wrongType(pl, rule)
}

// wrongType skips a value of the wrong type and records the schema error.
func (p *parser) wrongType(pl place, rule string) error {
	if err := p.skip(); err != nil {
		return err
	}
	p.fail(CodeInvalidField, pl, rule)
	return nil
}

// unknown skips the value of an unknown member and records the schema error.
func (p *parser) unknown(pl place) error {
	if err := p.skip(); err != nil {
		return err
	}
	p.fail(CodeUnknownField, pl, ruleUnknown)
	return nil
}

func (p *parser) fail(code string, pl place, rule string) {
	if p.err != nil {
		return
	}
	field := pl.String()
	msg := rule
	if field != "" {
		msg = field + " " + rule
	}
	p.err = &Error{Code: code, Message: msg, Field: field}
}

// JSON syntax.

func (p *parser) peek() byte {
	if p.pos < len(p.data) {
		return p.data[p.pos]
	}
	return 0
}

func (p *parser) skipSpace() {
	const space = 1<<' ' | 1<<'\t' | 1<<'\n' | 1<<'\r'
	d, i := p.data, p.pos
	for i < len(d) && d[i] <= ' ' && space>>d[i]&1 != 0 {
		i++
	}
	p.pos = i
}

// object reads the object at p.pos. For each member it calls member with the
// name and p.pos at the value, which member must consume; member returns the
// name's bit among the object's known names, or 0 for any other name.
func (p *parser) object(member func(name []byte) (uint32, error)) (seen uint32, err error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.peek() == '}' {
		p.pos++
		p.depth--
		return 0, nil
	}
	var others map[string]bool // unknown names, for duplicate detection
	for {
		if p.peek() != '"' {
			return 0, p.syntaxError("expected a member name in double quotes")
		}
		at := p.pos
		name, err := p.readString()
		if err != nil {
			return 0, err
		}
		p.skipSpace()
		if p.peek() != ':' {
			return 0, p.syntaxError("expected ':' after a member name")
		}
		p.pos++
		p.skipSpace()
		bit, err := member(name)
		if err != nil {
			return 0, err
		}
		if bit != 0 {
			if seen&bit != 0 {
				return 0, p.duplicateName(at, name)
			}
			seen |= bit
		} else {
			if others[string(name)] {
				return 0, p.duplicateName(at, name)
			}
			if others == nil {
				others = make(map[string]bool)
			}
			others[string(name)] = true
		}
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
			p.skipSpace()
		case '}':
			p.pos++
			p.depth--
			return seen, nil
		default:
			return 0, p.syntaxError("expected ',' or '}' after an object member")
		}
	}
}

// array reads the array at p.pos, calling elem with p.pos at each element,
// which elem must consume. It returns the number of elements.
func (p *parser) array(elem func(i int) error) (int, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	p.pos++ // '['
	p.skipSpace()
	if p.peek() == ']' {
		p.pos++
		p.depth--
		return 0, nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return 0, err
		}
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
			p.skipSpace()
		case ']':
			p.pos++
			p.depth--
			return i + 1, nil
		default:
			return 0, p.syntaxError("expected ',' or ']' after an array element")
		}
	}
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.syntaxError(fmt.Sprintf("nesting deeper than %d levels", maxDepth))
	}
	return nil
}

// skip reads any value, checking only that it is I-JSON.
func (p *parser) skip() error {
	switch c := p.peek(); {
	case c == '{':
		_, err := p.object(func([]byte) (uint32, error) { return 0, p.skip() })
		return err
	case c == '[':
		_, err := p.array(func(int) error { return p.skip() })
		return err
	case c == '"':
		_, err := p.readString()
		return err
	case c == '-' || isDigit(c):
		_, err := p.readNumber()
		return err
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case p.pos >= len(p.data):
		return p.syntaxError("unexpected end of the body")
	default:
		return p.syntaxError(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) literal(lit string) error {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return p.syntaxError("invalid literal; expected " + lit)
	}
	p.pos += len(lit)
	return nil
}

// readString reads the string at p.pos. The value is a slice of the body
// when the string has no escapes, a new slice otherwise.
func (p *parser) readString() ([]byte, error) {
	d := p.data
	start := p.pos + 1
	for i := start; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			p.pos = i + 1
			return d[start:i], nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return p.readStringSlow(start, i)
		}
	}
	return nil, p.syntaxErrorAt(len(d), "unterminated string")
}

func (p *parser) readStringSlow(start, i int) ([]byte, error) {
	d := p.data
	var out []byte // nil while the value is still d[start:i]
	for i < len(d) {
		switch c := d[i]; {
		case c == '"':
			p.pos = i + 1
			if out == nil {
				return d[start:i], nil
			}
			return out, nil
		case c == '\\':
			if out == nil {
				out = append(make([]byte, 0, i-start+16), d[start:i]...)
			}
			r, n, err := p.escape(i)
			if err != nil {
				return nil, err
			}
			out = utf8.AppendRune(out, r)
			i += n
		case c < 0x20:
			return nil, p.syntaxErrorAt(i, "control character in a string; escape it")
		case c < utf8.RuneSelf:
			if out != nil {
				out = append(out, c)
			}
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, p.syntaxErrorAt(i, "invalid UTF-8 in a string")
			}
			if out != nil {
				out = append(out, d[i:i+size]...)
			}
			i += size
		}
	}
	return nil, p.syntaxErrorAt(len(d), "unterminated string")
}

// escape decodes the escape sequence at d[i] ('\\'), returning the rune and
// the bytes it took. A surrogate must come as a valid pair (RFC 7493 §2.1).
func (p *parser) escape(i int) (rune, int, error) {
	d := p.data
	if i+1 >= len(d) {
		return 0, 0, p.syntaxErrorAt(i, "unterminated escape sequence")
	}
	switch d[i+1] {
	case '"', '\\', '/':
		return rune(d[i+1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r, ok := hex4(d[i+2:])
		if !ok {
			return 0, 0, p.syntaxErrorAt(i, `invalid \u escape; expected four hex digits`)
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, 0, p.syntaxErrorAt(i, "lone low surrogate in a \\u escape")
		case r >= 0xD800 && r <= 0xDBFF:
			if len(d) < i+12 || d[i+6] != '\\' || d[i+7] != 'u' {
				return 0, 0, p.syntaxErrorAt(i, "lone high surrogate in a \\u escape")
			}
			lo, ok := hex4(d[i+8:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return 0, 0, p.syntaxErrorAt(i, "lone high surrogate in a \\u escape")
			}
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, nil
		}
		return r, 6, nil
	}
	return 0, 0, p.syntaxErrorAt(i, "invalid escape sequence")
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (p *parser) duplicateName(at int, name []byte) error {
	return p.syntaxErrorAt(at, fmt.Sprintf("duplicate member name %q (RFC 7493 forbids it)", name))
}

func (p *parser) syntaxError(msg string) error { return p.syntaxErrorAt(p.pos, msg) }

func (p *parser) syntaxErrorAt(at int, msg string) error {
	return &Error{Code: CodeMalformedJSON, Message: fmt.Sprintf("malformed JSON at byte %d: %s", at, msg)}
}
