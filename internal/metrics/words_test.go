package metrics

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestWordTables checks every table's strings at every place a lookup can
// go wrong: each string matches itself, wherever d ends after it; no
// string matches with any one of its bytes changed to any other, or cut
// short by the end of d; and the careful parser's lookup takes a name's
// contents, and nothing longer or shorter.
func TestWordTables(t *testing.T) {
	tables := map[string]*wordTable{
		"request": requestNames, "case": caseNames, "tool check": toolCheckNames, "trace": traceNames,
		"status": statuses, "violation": violations,
	}
	for name, table := range tables {
		strs := table.strings()
		if len(strs) < 2 {
			t.Fatalf("%s: %d strings", name, len(strs))
		}
		for s, value := range strs {
			for _, tail := range []string{"", ":", `:1,"x":2}`} {
				d := []byte(s + tail)
				if e, ok := table.at(d, 0); !ok || e.value != value || e.size != len(s) {
					t.Errorf("%s: %s before %q: not found", name, s, tail)
				}
				if e, ok := table.at(append([]byte(`{ `), d...), 2); !ok || e.value != value {
					t.Errorf("%s: %s after two bytes: not found", name, s)
				}
			}
			for cut := range len(s) {
				if _, ok := table.at([]byte(s[:cut]), 0); ok {
					t.Errorf("%s: %q, the first %d bytes of %s, matches", name, s[:cut], cut, s)
				}
			}
			for at := range len(s) {
				for c := range 256 {
					if byte(c) == s[at] {
						continue
					}
					d := []byte(s + `:1}`)
					d[at] = byte(c)
					if e, ok := table.at(d, 0); ok && !bytes.HasPrefix(d, []byte(table.string(e))) {
						t.Fatalf("%s: %q matches %s", name, d, table.string(e))
					}
				}
			}
			contents := s[1 : len(s)-1]
			if got, ok := table.lookup([]byte(contents)); !ok || got != value {
				t.Errorf("%s: lookup(%s) = %d, %v, want %d", name, contents, got, ok, value)
			}
			for _, other := range []string{contents[1:], contents[:len(contents)-1], contents + "x", contents + `"`, contents + `":`, `"` + contents} {
				if got, ok := table.lookup([]byte(other)); ok {
					t.Errorf("%s: lookup(%q) = %d, want none", name, other, got)
				}
			}
		}
	}
}

func TestNewWordTable(t *testing.T) {
	for name, values := range map[string]map[string]uint32{
		"a shared slot": {"case_id": 1, "case_ids": 2},
		"too long":      {"instruction_override_xy": 1}, // 25 bytes with its quotes
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("newWordTable did not panic")
				}
			}()
			newWordTable(values)
		})
	}
}

// strings returns the table's strings, with their values.
func (t *wordTable) strings() map[string]uint32 {
	m := map[string]uint32{}
	for s := range t {
		if e := &t[s]; e.size != 0 {
			m[t.string(e)] = e.value
		}
	}
	return m
}

func (t *wordTable) string(e *wordEntry) string {
	var b [24]byte
	for j, w := range e.word {
		binary.LittleEndian.PutUint64(b[8*j:], w)
	}
	return string(b[:e.size])
}
