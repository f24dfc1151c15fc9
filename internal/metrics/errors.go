package metrics

import (
	"strconv"
	"strings"
)

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
