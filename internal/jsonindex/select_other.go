//go:build !amd64 || purego

package jsonindex

// useAVX2 is the choice of Index: the portable builder, as this build has
// no assembly.
const useAVX2 = false

func blocksAVX2(c *carry, buf []byte, base uint32, dst []uint32) int {
	panic("jsonindex: no AVX2 builder in this build")
}
