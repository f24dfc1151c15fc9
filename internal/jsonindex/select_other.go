//go:build !amd64 || purego

package jsonindex

// hasAVX2 reports whether blocksAVX2 can run: never in this build, which
// has no assembly.
const hasAVX2 = false

// useAVX2 is the choice of Index: the portable builder.
const useAVX2 = false

func blocksAVX2(c *carry, buf []byte, base uint32, dst []uint32) int {
	panic("jsonindex: no AVX2 builder in this build")
}
