// Command _asm generates the AVX2 builder of package jsonindex with avo:
// index_amd64.s and its stub, index_amd64.go. Run `make generate-asm` (or
// go generate in internal/jsonindex); `make verify-asm` checks that the
// committed files are what it generates.
//
// It is a module of its own, so that avo is not a dependency of
// evalmeter, and a directory whose name starts with '_', so that ./... in
// evalmeter's module does not build it.
package main

import (
	// Package loads it to lay out the arguments; importing it keeps it in
	// go.mod. Build with -tags purego, so as not to need the assembly
	// being generated.
	_ "github.com/evalmeter/evalmeter/internal/jsonindex"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

const even = 0x5555555555555555

// The offsets of carry's fields rich and unusual, which jsonindex's
// TestCarryLayout checks.
const (
	richOffset    = 24
	unusualOffset = 32
)

func main() {
	Package("github.com/evalmeter/evalmeter/internal/jsonindex")
	ConstraintExpr("!purego")

	quote := splat("quotes", '"')
	backslash := splat("backslashes", '\\')
	// VPSHUFB looks up each byte's low nibble (0 for a byte ≥ 0x80) in a
	// 16-byte table: a byte is in a set when the table holds the byte itself
	// at its nibble. 0xff is in no set; a byte ≥ 0x80 finds 0 or 0xff.
	space := table("spaces", map[byte]byte{0x0: ' ', 0x9: '\t', 0xa: '\n', 0xd: '\r'})
	ops := table("ops", map[byte]byte{0xa: ':', 0xb: '[', 0xc: ',', 0xd: ']'})
	braces := table("braces", map[byte]byte{0xb: '{', 0xd: '}'})
	// What a two-byte escape may escape: " \ / b f n r t. b and r share
	// their low nibble with '"', so they are compared on their own.
	shorts := table("shorts", map[byte]byte{0x2: '"', 0x4: 't', 0x6: 'f', 0xc: '\\', 0xe: 'n', 0xf: '/'})
	bees := splat("bees", 'b')
	ars := splat("ars", 'r')
	controls := splat("controls", 0x1f) // the largest control character

	TEXT("blocksAVX2", NOSPLIT, "func(c *carry, buf []byte, base uint32, dst []uint32) int")
	Doc("blocksAVX2 is the AVX2 builder (see the builders in index.go): carry.structurals, a block at a time.")
	Pragma("noescape")

	c := Dereference(Param("c"))
	inString := Load(c.Field("inString"), GP64()).(GPVirtual)
	escaped := Load(c.Field("escaped"), GP64()).(GPVirtual)
	scalarCarry := Load(c.Field("scalar"), GP64())
	// rich and unusual are added to in memory: registers are short.
	cp := Load(Param("c"), GP64())
	rich := Mem{Base: cp, Disp: richOffset}
	unusual := Mem{Base: cp, Disp: unusualOffset}
	p := Load(Param("buf").Base(), GP64())
	left := Load(Param("buf").Len(), GP64())
	pos := Load(Param("base"), GP32())
	dst := Load(Param("dst").Base(), GP64())
	n := GP64()
	XORQ(n, n)

	Yquote, Ybackslash, Yspace, Yops, Ybraces, Yshorts, Ycontrols := YMM(), YMM(), YMM(), YMM(), YMM(), YMM(), YMM()
	VMOVDQU(quote, Yquote)
	VMOVDQU(backslash, Ybackslash)
	VMOVDQU(space, Yspace)
	VMOVDQU(ops, Yops)
	VMOVDQU(braces, Ybraces)
	VMOVDQU(shorts, Yshorts)
	VMOVDQU(controls, Ycontrols)
	ones := XMM() // the carry-less multiplier whose product is the prefix XOR
	VPCMPEQB(ones, ones, ones)

	Label("block")
	CMPQ(left, Imm(64))
	JB(LabelRef("done"))
	lo, hi := YMM(), YMM()
	VMOVDQU(Mem{Base: p}, lo)
	VMOVDQU(Mem{Base: p, Disp: 32}, hi)

	Comment("quote &^= escapes(backslash)")
	q := mask(lo, hi, func(x, t VecVirtual) { VPCMPEQB(x, Yquote, t) })
	bs := mask(lo, hi, func(x, t VecVirtual) { VPCMPEQB(x, Ybackslash, t) })
	ANDNQ(bs, escaped, bs) // bs = bs &^ escaped
	follows := GP64()
	MOVQ(bs, follows)
	SHLQ(Imm(1), follows)
	ORQ(escaped, follows)
	odd := GP64()
	MOVQ(U64(^uint64(even)), odd)
	ANDQ(bs, odd)
	ANDNQ(odd, follows, odd)     // odd starts = bs &^ even &^ follows
	MOVL(U32(0), escaped.As32()) // MOV leaves the flags to ADD
	ADDQ(bs, odd)
	SETCS(escaped.As8())
	SHLQ(Imm(1), odd)
	evens := GP64()
	MOVQ(U64(even), evens)
	XORQ(evens, odd)
	ANDQ(follows, odd)
	ANDNQ(q, odd, q) // q = q &^ escaped bytes
	Comment("unusual |= escaped &^ short, where anything is escaped")
	TESTQ(odd, odd)
	JZ(LabelRef("strings"))
	short := mask(lo, hi, func(x, t VecVirtual) {
		u := YMM()
		VPSHUFB(x, Yshorts, t)
		VPCMPEQB(x, t, t)
		VPCMPEQB(bees, x, u)
		VPOR(u, t, t)
		VPCMPEQB(ars, x, u)
		VPOR(u, t, t)
	})
	ANDNQ(odd, short, short)
	ORQ(short, unusual)

	Label("strings")

	Comment("in := prefixXOR(quote) ^ inString")
	// VEX-encoded moves: a legacy SSE instruction among AVX ones, with the
	// upper halves of the Y registers in use, made the whole pass 11 times
	// slower on an Intel Xeon (TestVEXOnly).
	xq := XMM()
	VMOVQ(q, xq)
	VPCLMULQDQ(Imm(0), ones, xq, xq)
	in := GP64()
	VMOVQ(xq, in)
	XORQ(inString, in)
	MOVQ(in, inString)
	SARQ(Imm(63), inString)
	outside := GP64()
	MOVQ(in, outside)
	ORQ(q, outside)
	NOTQ(outside)
	ANDQ(in, q) // opening quotes

	Comment("rich |= (backslash | control | high) & in; unusual |= control & in")
	ctl := mask(lo, hi, func(x, t VecVirtual) {
		VPMINUB(Ycontrols, x, t)
		VPCMPEQB(x, t, t)
	})
	ANDQ(in, ctl)
	ORQ(ctl, unusual)
	ORQ(ctl, rich)
	odd8 := mask(lo, hi, func(x, t VecVirtual) {
		VPCMPEQB(x, Ybackslash, t)
		VPOR(x, t, t) // the high bit of a byte of 0x80 and more
	})
	ANDQ(in, odd8)
	ORQ(odd8, rich)

	Comment("operators outside strings, and the starts of scalars")
	op := mask(lo, hi, func(x, t VecVirtual) {
		u := YMM()
		VPSHUFB(x, Yops, t)
		VPCMPEQB(x, t, t)
		VPSHUFB(x, Ybraces, u)
		VPCMPEQB(x, u, u)
		VPOR(u, t, t)
	})
	ANDQ(outside, op)
	sp := mask(lo, hi, func(x, t VecVirtual) {
		VPSHUFB(x, Yspace, t)
		VPCMPEQB(x, t, t)
	})
	ORQ(op, sp)
	scalar := GP64()
	ANDNQ(outside, sp, scalar) // scalar = outside &^ (op | space)
	prev := GP64()
	MOVQ(scalar, prev)
	SHLQ(Imm(1), prev)
	ORQ(scalarCarry, prev)
	MOVQ(scalar, scalarCarry)
	SHRQ(Imm(63), scalarCarry)
	ANDNQ(scalar, prev, scalar) // starts
	ORQ(op, scalar)
	ORQ(q, scalar)

	Comment("append the positions, eight at a time: writing past the last is")
	Comment("harmless (dst has room for 64 a block), and one branch for eight")
	Comment("positions costs less than one for each")
	TESTQ(scalar, scalar)
	JZ(LabelRef("next"))
	end := GP64()
	POPCNTQ(scalar, end)
	ADDQ(n, end)
	Label("bits")
	at := GP64()
	for k := range 8 {
		TZCNTQ(scalar, at)
		ADDL(pos, at.As32())
		MOVL(at.As32(), Mem{Base: dst, Index: n, Scale: 4, Disp: 4 * k})
		BLSRQ(scalar, scalar)
	}
	ADDQ(Imm(8), n)
	TESTQ(scalar, scalar)
	JNZ(LabelRef("bits"))
	MOVQ(end, n)

	Label("next")
	ADDQ(Imm(64), p)
	SUBQ(Imm(64), left)
	ADDL(Imm(64), pos)
	JMP(LabelRef("block"))

	Label("done")
	Store(inString, c.Field("inString"))
	Store(escaped, c.Field("escaped"))
	Store(scalarCarry, c.Field("scalar"))
	Store(n, ReturnIndex(0))
	VZEROUPPER()
	RET()

	Generate()
}

// mask returns in a register the 64-bit mask of the bytes of lo and hi
// (a block's halves) for which f sets the byte of t.
func mask(lo, hi VecVirtual, f func(x, t VecVirtual)) GPVirtual {
	tlo, thi := YMM(), YMM()
	f(lo, tlo)
	f(hi, thi)
	m, h := GP64(), GP64()
	VPMOVMSKB(tlo, m.As32())
	VPMOVMSKB(thi, h.As32())
	SHLQ(Imm(32), h)
	ORQ(h, m)
	return m
}

// splat is 32 bytes of c.
func splat(name string, c byte) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i := range 32 {
		DATA(i, U8(c))
	}
	return m
}

// table is a VPSHUFB table of 16 bytes, twice (one per 128-bit lane):
// at[nibble], 0xff elsewhere.
func table(name string, at map[byte]byte) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i := range 32 {
		b, ok := at[byte(i%16)]
		if !ok {
			b = 0xff
		}
		DATA(i, U8(b))
	}
	return m
}
