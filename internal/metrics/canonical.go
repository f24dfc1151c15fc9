package metrics

import "strconv"

// The canonical form (RFC 8785, JCS) of a valid request. Members are written
// in the order RFC 8785 sorts them; every name is ASCII, so that order is
// plain byte order, fixed here by hand. Every string of a valid request is an
// identifier or an enum, which JSON writes without escapes.

// appendCase appends the canonical form of a valid case read from body.
func appendCase(dst, body []byte, c *observation) []byte {
	dst = append(dst, '{')
	if c.has&hasViolations != 0 {
		dst = append(dst, `"boundary_violations":[`...)
		for j, v := range c.reported {
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
	dst = appendPlain(dst, c.id)
	if c.has&hasCost != 0 {
		dst = append(dst, `,"cost":`...)
		dst = appendNumber(dst, body, &c.cost)
	}
	if c.has&hasInput != 0 {
		dst = append(dst, `,"input_tokens":`...)
		dst = appendNumber(dst, body, &c.input)
	}
	dst = append(dst, `,"latency_ms":`...)
	dst = appendNumber(dst, body, &c.latency)
	if c.has&hasOutput != 0 {
		dst = append(dst, `,"output_tokens":`...)
		dst = appendNumber(dst, body, &c.output)
	}
	if c.has&hasRepeatGroup != 0 {
		dst = append(dst, `,"repeat_group":`...)
		dst = appendPlain(dst, c.repeatGroup)
	}
	dst = append(dst, `,"status":"`...)
	dst = append(dst, c.status.String()...)
	dst = append(dst, '"')
	if c.has&hasToolChecks != 0 {
		dst = append(dst, `,"tool_checks":[`...)
		for j, tc := range c.checks {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = appendPlain(dst, tc.name)
			dst = append(dst, `,"passed":`...)
			dst = strconv.AppendBool(dst, tc.passed)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if c.has&hasTrace != 0 {
		dst = append(dst, `,"trace":{"expected_steps":`...)
		dst = appendNumber(dst, body, &c.expected)
		dst = append(dst, `,"observed_steps":`...)
		dst = appendNumber(dst, body, &c.observed)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendTrailer appends what follows the cases: the end of the array and
// the request's own members.
func (r *Request) appendTrailer(dst []byte) []byte {
	dst = append(dst, ']')
	if r.costCurrency != nil {
		dst = append(dst, `,"cost_currency":`...)
		dst = appendPlain(dst, r.costCurrency)
	}
	dst = append(dst, `,"run_id":`...)
	dst = appendPlain(dst, r.runID)
	return append(dst, '}')
}

// appendPlain appends a string that needs no escapes (validID, an enum).
func appendPlain(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
