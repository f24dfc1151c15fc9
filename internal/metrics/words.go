package metrics

import (
	"encoding/binary"
	"fmt"
)

// A wordTable finds which of a few JSON strings, each of at most 24 bytes
// with its quotes, the bytes at a '"' begin, without a branch that depends
// on which it is. The fast path reads member names and enums with one:
// members come in any order and enums in any mix, and comparing with each
// string in turn costs a mispredicted branch or two at nearly every one,
// the largest cost on a request whose cases order their members at random
// (docs/design.md#51-reading-the-body).
//
// Each string has a slot of its own, picked by slot from its first bytes.
// A lookup compares the bytes with the one string in their slot, 24 bytes
// at once under a mask.
type wordTable [32]wordEntry

type wordEntry struct {
	word, mask [3]uint64
	size       int    // of the string, with its quotes; 0 in an empty slot
	value      uint32 // what the string stands for
}

// newWordTable builds the table of the strings with these contents, each
// given with its value. It panics where two share a slot, which every test
// run would show.
func newWordTable(values map[string]uint32) *wordTable {
	t := new(wordTable)
	for name, value := range values {
		var b, m [24]byte
		if len(name)+2 > len(b) {
			panic(fmt.Sprintf("metrics: %q cannot be in a word table", name))
		}
		b[0], b[1+copy(b[1:], name)] = '"', '"'
		for j := range len(name) + 2 {
			m[j] = 0xff
		}
		w0, w1, w2 := words(b[:], 0)
		m0, m1, m2 := words(m[:], 0)
		e := &t[slot(w0)]
		if e.size != 0 {
			panic(fmt.Sprintf("metrics: %q has the slot of another string", name))
		}
		*e = wordEntry{word: [3]uint64{w0, w1, w2}, mask: [3]uint64{m0, m1, m2}, size: len(name) + 2, value: value}
	}
	return t
}

// slot is a string's slot: from the four bytes after its quote, which
// this multiplier spreads over the slots without a collision among the
// names of any object or enum.
func slot(w0 uint64) uint { return uint(uint32(w0>>8)*603>>27) % uint(len(wordTable{})) }

// words returns the 24 bytes at d[i] as three words, followed by zeros
// where d ends before: no string has a zero byte, so none matches there.
func words(d []byte, i int) (w0, w1, w2 uint64) {
	var w []byte
	if i+24 <= len(d) {
		w = d[i : i+24]
	} else {
		var end [24]byte
		copy(end[:], d[min(i, len(d)):])
		w = end[:]
	}
	return binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:]), binary.LittleEndian.Uint64(w[16:])
}

// at returns the entry of the string that the bytes at d[i] begin with,
// and whether they begin with one.
func (t *wordTable) at(d []byte, i int) (*wordEntry, bool) {
	w0, w1, w2 := words(d, i)
	e := &t[slot(w0)]
	return e, e.size != 0 && (w0^e.word[0])&e.mask[0]|(w1^e.word[1])&e.mask[1]|(w2^e.word[2])&e.mask[2] == 0
}

// lookup returns the value of a string's contents, read and unescaped by
// the careful parser, and whether the table has it.
func (t *wordTable) lookup(name []byte) (uint32, bool) {
	var b [24]byte
	if len(name)+2 > len(b) {
		return 0, false
	}
	b[0] = '"'
	copy(b[1:], name)
	b[1+len(name)] = '"'
	// The contents may hold a quote that was escaped: all must match.
	if e, ok := t.at(b[:], 0); ok && e.size == len(name)+2 {
		return e.value, true
	}
	return 0, false
}

// byName maps names to values, which value gives from their index.
func byName(names []string, value func(k int) uint32) map[string]uint32 {
	m := make(map[string]uint32, len(names))
	for k, name := range names {
		m[name] = value(k)
	}
	return m
}
