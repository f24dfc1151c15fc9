package jsonindex

import (
	"encoding/binary"
	"math/bits"

	"github.com/evalmeter/evalmeter/internal/swar"
)

// blocksGo is the portable builder: each 8-byte word is classified with
// SWAR, its marks packed into the block's masks.
func blocksGo(c *carry, buf []byte, base uint32, dst []uint32) int {
	n := 0
	for at := 0; at+64 <= len(buf); at += 64 {
		s := c.structurals(classify((*[64]byte)(buf[at:])))
		for s != 0 {
			dst[n] = base + uint32(at+bits.TrailingZeros64(s))
			n++
			s &= s - 1
		}
	}
	return n
}

// classify returns the masks of a block's quotes, backslashes, operators
// ({ } [ ] : ,) and whitespace.
func classify(b *[64]byte) (quote, backslash, op, space uint64) {
	const lower = 0x2020202020202020 // '[' | 0x20 is '{', ']' | 0x20 is '}'
	for i := range 8 {
		w := binary.LittleEndian.Uint64(b[8*i:])
		l := w | lower
		shift := uint(8 * i)
		quote |= swar.Gather(swar.Match(w, '"')) << shift
		backslash |= swar.Gather(swar.Match(w, '\\')) << shift
		op |= swar.Gather(swar.Match(l, '{')|swar.Match(l, '}')|swar.Match(w, ',')|swar.Match(w, ':')) << shift
		space |= swar.Gather(swar.Match(w, ' ')|swar.Match(w, '\t')|swar.Match(w, '\n')|swar.Match(w, '\r')) << shift
	}
	return
}
