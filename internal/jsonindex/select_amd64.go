//go:build !purego

package jsonindex

import "golang.org/x/sys/cpu"

// useAVX2 is the choice of Index, made once from the CPU's features: the
// package's only global. blocksAVX2 uses AVX2, PCLMULQDQ (the prefix XOR)
// BMI1 (TZCNT, BLSR, ANDN) and POPCNT. Tests run both builders through index.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasBMI1 && cpu.X86.HasPOPCNT
