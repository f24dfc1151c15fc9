// Package swartest checks the byte classes of package swar and of its
// users exhaustively.
package swartest

import (
	"encoding/binary"
	"testing"
)

// Exact puts every byte at every place of a word beside every other byte,
// and fails unless mask marks with its high bit exactly the bytes that
// marked says, each at its place.
func Exact(t *testing.T, name string, mask func(uint64) uint64, marked func(byte) bool) {
	t.Helper()
	var w [8]byte
	for at := range 8 {
		for c := range 256 {
			for other := range 256 {
				for i := range w {
					w[i] = byte(other)
				}
				w[at] = byte(c)
				var want uint64
				for i, b := range w {
					if marked(b) {
						want |= 0x80 << (8 * i)
					}
				}
				if m := mask(binary.LittleEndian.Uint64(w[:])); m != want {
					t.Fatalf("%s(%q) = %#x, want %#x", name, w, m, want)
				}
			}
		}
	}
}
