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
		b := (*[64]byte)(buf[at:])
		var m masks
		classify(b, &m)
		if m.backslash|c.escaped != 0 {
			m.short = shortEscapes(b)
		} // else nothing is escaped, and short does not matter
		s := c.structurals(&m)
		for s != 0 {
			dst[n] = base + uint32(at+bits.TrailingZeros64(s))
			n++
			s &= s - 1
		}
	}
	return n
}

// classify sets the masks of a block but short.
func classify(b *[64]byte, m *masks) {
	const lower = 0x2020202020202020 // '[' | 0x20 is '{', ']' | 0x20 is '}'
	for i := range 8 {
		w := binary.LittleEndian.Uint64(b[8*i:])
		l := w | lower
		shift := uint(8 * i)
		m.quote |= swar.Gather(swar.Match(w, '"')) << shift
		m.backslash |= swar.Gather(swar.Match(w, '\\')) << shift
		m.op |= swar.Gather(swar.Match(l, '{')|swar.Match(l, '}')|swar.Match(w, ',')|swar.Match(w, ':')) << shift
		m.space |= swar.Gather(swar.Match(w, ' ')|swar.Match(w, '\t')|swar.Match(w, '\n')|swar.Match(w, '\r')) << shift
		m.control |= swar.Gather(swar.Control(w)) << shift
		m.high |= swar.Gather(swar.NonASCII(w)) << shift
	}
}

// shortEscapes returns the mask of a block's bytes that a two-byte escape
// may escape.
func shortEscapes(b *[64]byte) uint64 {
	var short uint64
	for i := range 8 {
		w := binary.LittleEndian.Uint64(b[8*i:])
		m := swar.Match(w, '"') | swar.Match(w, '\\') | swar.Match(w, '/') | swar.Match(w, 'b') |
			swar.Match(w, 'f') | swar.Match(w, 'n') | swar.Match(w, 'r') | swar.Match(w, 't')
		short |= swar.Gather(m) << uint(8*i)
	}
	return short
}
