package metrics

import (
	"encoding/binary"
	"testing"
)

// TestNotID puts every byte at every place of a word beside every other
// byte: notID marks exactly the bytes that isIDByte refuses.
func TestNotID(t *testing.T) {
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
					if !isIDByte(b) {
						want |= 0x80 << (8 * i)
					}
				}
				if m := notID(binary.LittleEndian.Uint64(w[:])); m != want {
					t.Fatalf("notID(%q) = %#x, want %#x", w, m, want)
				}
			}
		}
	}
}
