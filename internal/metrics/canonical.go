package metrics

import "strconv"

// AppendCanonical appends the RFC 8785 (JCS) form of the request as it was
// received: no member added, none dropped, boundary codes not de-duplicated.
// Members are written in the order RFC 8785 sorts them; every name is ASCII,
// so that order is plain byte order, fixed here by hand.
func (r *Request) AppendCanonical(dst []byte) []byte {
	return r.appendCanonical(dst, nil)
}

// appendCanonical is AppendCanonical that, when flush is not nil, hands
// dst to flush and starts it again whenever it outgrows its capacity, so
// that hashing needs no buffer the size of the body.
func (r *Request) appendCanonical(dst []byte, flush func([]byte)) []byte {
	dst = append(dst, `{"cases":[`...)
	for i := range r.cases {
		if i > 0 {
			dst = append(dst, ',')
		}
		if flush != nil && len(dst) > cap(dst)/2 {
			flush(dst)
			dst = dst[:0]
		}
		dst = r.appendCase(dst, &r.cases[i])
	}
	dst = append(dst, ']')
	if r.costCurrency != nil {
		dst = append(dst, `,"cost_currency":`...)
		dst = appendString(dst, r.costCurrency)
	}
	dst = append(dst, `,"run_id":`...)
	dst = appendString(dst, r.runID)
	return append(dst, '}')
}

func (r *Request) appendCase(dst []byte, c *observation) []byte {
	dst = append(dst, '{')
	if c.has&hasViolations != 0 {
		dst = append(dst, `"boundary_violations":[`...)
		for j, v := range r.violations[c.reported.start : c.reported.start+c.reported.n] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, v.String()...)
			dst = append(dst, '"')
		}
		dst = append(dst, "],"...)
	}
	dst = append(dst, `"case_id":`...)
	dst = appendString(dst, c.id)
	if c.has&hasCost != 0 {
		dst = append(dst, `,"cost":`...)
		dst = appendNumber(dst, c.cost)
	}
	if c.has&hasInput != 0 {
		dst = append(dst, `,"input_tokens":`...)
		dst = strconv.AppendInt(dst, c.input, 10)
	}
	dst = append(dst, `,"latency_ms":`...)
	dst = appendNumber(dst, c.latency)
	if c.has&hasOutput != 0 {
		dst = append(dst, `,"output_tokens":`...)
		dst = strconv.AppendInt(dst, c.output, 10)
	}
	if c.has&hasRepeatGroup != 0 {
		dst = append(dst, `,"repeat_group":`...)
		dst = appendString(dst, c.repeatGroup)
	}
	dst = append(dst, `,"status":"`...)
	dst = append(dst, c.status.String()...)
	dst = append(dst, '"')
	if c.has&hasToolChecks != 0 {
		dst = append(dst, `,"tool_checks":[`...)
		for j, tc := range r.toolChecks[c.checks.start : c.checks.start+c.checks.n] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = appendString(dst, tc.name)
			dst = append(dst, `,"passed":`...)
			dst = strconv.AppendBool(dst, tc.passed)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if c.has&hasTrace != 0 {
		dst = append(dst, `,"trace":{"expected_steps":`...)
		dst = strconv.AppendInt(dst, c.expected, 10)
		dst = append(dst, `,"observed_steps":`...)
		dst = strconv.AppendInt(dst, c.observed, 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendString appends s as RFC 8785 §3.2.2.2 writes strings: only '"', '\\'
// and control characters escaped, the short forms where JSON has them.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
