package metrics

import (
	"net/http"
	"strconv"
	"strings"
)

// Error codes of the error envelope (DESIGN.md §4) that the engine produces.
const (
	CodeMalformedJSON = "malformed_json" // 400
	CodeUnknownField  = "unknown_field"  // 422
	CodeMissingField  = "missing_field"  // 422
	CodeInvalidField  = "invalid_field"  // 422
)

// Error is why a request was refused. It marshals as the inner object of
// the error envelope (spec §2.1).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field is the path of the first offending place, such as
	// "cases[3].latency_ms"; empty when the whole body is at fault.
	Field string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// HTTPStatus is 400 for a body that is not I-JSON and 422 for one that
// breaks the metrics schema.
func (e *Error) HTTPStatus() int {
	if e.Code == CodeMalformedJSON {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}

// place names a spot in the request for error.field. It is formatted only
// for the first error, so that invalid input costs no more than valid input.
type place struct {
	kase  int    // index in cases, or -1 outside them
	group string // member of the case holding a list or object: "tool_checks", "boundary_violations", "trace"
	item  int    // index within group, or -1
	name  string // member name, or ""
}

func (pl place) String() string {
	var b strings.Builder
	if pl.kase >= 0 {
		b.WriteString("cases[")
		b.WriteString(strconv.Itoa(pl.kase))
		b.WriteString("]")
	}
	if pl.group != "" {
		b.WriteString(".")
		b.WriteString(pl.group)
		if pl.item >= 0 {
			b.WriteString("[")
			b.WriteString(strconv.Itoa(pl.item))
			b.WriteString("]")
		}
	}
	if pl.name != "" {
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.WriteString(pl.name)
	}
	return b.String()
}

// top is a member of the request object itself.
func top(name string) place { return place{kase: -1, item: -1, name: name} }
