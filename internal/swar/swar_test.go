package swar

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// TestStringStops puts every byte at every place of a word of plain bytes,
// beside every other byte: the lowest mark is the first stop, exactly.
func TestStringStops(t *testing.T) {
	isStop := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	var w [8]byte
	for at := range 8 {
		for c := range 256 {
			for next := range 256 {
				for i := range w {
					w[i] = 'a'
				}
				w[at] = byte(c)
				if at < 7 {
					w[at+1] = byte(next)
				}
				want := -1
				for i, b := range w {
					if isStop(b) {
						want = i
						break
					}
				}
				m := StringStops(binary.LittleEndian.Uint64(w[:]))
				got := -1
				if m != 0 {
					got = bits.TrailingZeros64(m) / 8
				}
				if got != want {
					t.Fatalf("%q: first stop at %d, want %d", w, got, want)
				}
				if m&^0x8080808080808080 != 0 {
					t.Fatalf("%q: marks %#x outside the high bits", w, m)
				}
			}
		}
	}
}

func TestNonASCII(t *testing.T) {
	w := binary.LittleEndian.Uint64([]byte{'a', 0x80, 'b', 0xff, 0x7f, 0, 0xc3, 'z'})
	if got, want := NonASCII(w), uint64(0x0080_0000_8000_8000); got != want {
		t.Errorf("NonASCII = %#x, want %#x", got, want)
	}
}

// TestMatch puts every byte at every place beside every other byte: every
// mark is exact, and Gather packs them in order.
func TestMatch(t *testing.T) {
	for c := range 256 {
		var w [8]byte
		for at := range 8 {
			for other := range 256 {
				for i := range w {
					w[i] = byte(other)
				}
				w[at] = byte(c)
				m := Match(binary.LittleEndian.Uint64(w[:]), byte(c))
				var want, wantGathered uint64
				for i, b := range w {
					if b == byte(c) {
						want |= 0x80 << (8 * i)
						wantGathered |= 1 << i
					}
				}
				if m != want {
					t.Fatalf("Match(%q, %#x) = %#x, want %#x", w, c, m, want)
				}
				if g := Gather(m); g != wantGathered {
					t.Fatalf("Gather(%#x) = %#b, want %#b", m, g, wantGathered)
				}
			}
		}
	}
}

// TestControl puts every byte at every place beside every other byte:
// every mark is exact.
func TestControl(t *testing.T) {
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
					if b < 0x20 {
						want |= 0x80 << (8 * i)
					}
				}
				if m := Control(binary.LittleEndian.Uint64(w[:])); m != want {
					t.Fatalf("Control(%q) = %#x, want %#x", w, m, want)
				}
			}
		}
	}
}

// TestBetween checks a grid of ranges of 7-bit bytes, and those the
// metrics engine uses, against every byte at every place beside every
// other byte: every mark is exact.
func TestBetween(t *testing.T) {
	ranges := [][2]int{{'a', 'z'}, {'0', ':'}, {'-', '.'}, {'_', '_'}, {1, 0x7e}}
	for lo := 1; lo < 0x7f; lo += 3 {
		for hi := lo; hi < 0x7f; hi += 5 {
			ranges = append(ranges, [2]int{lo, hi})
		}
	}
	var w [8]byte
	for _, r := range ranges {
		lo, hi := r[0], r[1]
		for at := range 8 {
			for c := range 0x80 {
				for other := range 0x80 {
					for i := range w {
						w[i] = byte(other)
					}
					w[at] = byte(c)
					var want uint64
					for i, b := range w {
						if int(b) >= lo && int(b) <= hi {
							want |= 0x80 << (8 * i)
						}
					}
					if m := Between(binary.LittleEndian.Uint64(w[:]), byte(lo), byte(hi)); m != want {
						t.Fatalf("Between(%q, %#x, %#x) = %#x, want %#x", w, lo, hi, m, want)
					}
				}
			}
		}
	}
}
