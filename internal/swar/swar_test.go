package swar

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/evalmeter/evalmeter/internal/swar/swartest"
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

// TestControl: every mark is exact.
func TestControl(t *testing.T) {
	swartest.Exact(t, "Control", Control, func(c byte) bool { return c < 0x20 })
}

// TestBetween checks the ranges that swar's users use and a grid of
// others: every mark is exact, and no byte above 0x7f is marked.
func TestBetween(t *testing.T) {
	ranges := [][2]byte{{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'0', ':'}, {'-', '.'}, {'_', '_'}, {1, 0x7e}}
	for lo := 1; lo < 0x7f; lo += 9 {
		for hi := lo; hi < 0x7f; hi += 13 {
			ranges = append(ranges, [2]byte{byte(lo), byte(hi)})
		}
	}
	for _, r := range ranges {
		lo, hi := r[0], r[1]
		swartest.Exact(t, fmt.Sprintf("Between[%#x,%#x]", lo, hi),
			func(w uint64) uint64 { return Between(w, lo, hi) },
			func(c byte) bool { return c >= lo && c <= hi })
	}
}

// TestNonDigits: every mark is exact.
func TestNonDigits(t *testing.T) {
	swartest.Exact(t, "NonDigits", NonDigits, func(c byte) bool { return c < '0' || c > '9' })
}

// TestDigitsValue reads numbers of every length from 1 to 8 digits,
// followed by other bytes.
func TestDigitsValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for k := 1; k <= 8; k++ {
		for range 10000 {
			var w [8]byte
			var want uint64
			for i := range w {
				w[i] = byte(rng.IntN(256))
				if i < k {
					w[i] = '0' + byte(rng.IntN(10))
					want = want*10 + uint64(w[i]-'0')
				}
			}
			if got := DigitsValue(binary.LittleEndian.Uint64(w[:]), k); got != want {
				t.Fatalf("DigitsValue(%q, %d) = %d, want %d", w, k, got, want)
			}
		}
	}
}
