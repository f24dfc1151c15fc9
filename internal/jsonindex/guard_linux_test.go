package jsonindex

import (
	"syscall"
	"testing"
)

// TestNoReadPastEnd puts inputs of every length to 130 bytes at the very
// end of a readable page, before one that faults when read: a read past
// len(buf) crashes the test.
func TestNoReadPastEnd(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	for n := 0; n <= 130; n++ {
		buf := mem[page-n : page : page]
		for i := range buf {
			buf[i] = `{"a\":[1, "x"]}`[i%15]
		}
		check(t, buf)
	}
}
