package metrics

import (
	"bytes"
	"fmt"
	"testing"
)

// TestAppendShort appends strings of every length up to past shortCopy,
// from sources and into destinations with and without room for the whole
// copy: each gives what append gives, and leaves what dst held.
func TestAppendShort(t *testing.T) {
	src := make([]byte, 100)
	for i := range src {
		src[i] = 'a' + byte(i%26)
	}
	for size := range shortCopy + 3 {
		for _, spare := range []int{0, 1, shortCopy - 1, shortCopy, 64} { // src's bytes after s
			for _, room := range []int{0, size, shortCopy - 1, shortCopy, 64} { // dst's capacity after its bytes
				name := fmt.Sprintf("size %d, spare %d, room %d", size, spare, room)
				s := src[: size : size+spare]
				dst := append(make([]byte, 0, 5+room), "head:"...)
				want := append([]byte("head:"), s...)
				got := appendShort(dst, s)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: appendShort = %q, want %q", name, got, want)
				}
				// A second piece lands right after the first.
				if got = appendShort(got, []byte("!")); !bytes.Equal(got, append(want, '!')) {
					t.Fatalf("%s: then appending %q gives %q", name, "!", got)
				}
			}
		}
	}
}

// TestPieces: each enum's piece is its name in JSON, in its place.
func TestPieces(t *testing.T) {
	for k, want := range map[int]string{int(statusPass): `,"status":"pass"`, int(statusTimeout): `,"status":"timeout"`} {
		if got := string(statusJSON[k]); got != want {
			t.Errorf("statusJSON[%d] = %s, want %s", k, got, want)
		}
	}
	if got := string(violationJSON[unauthorizedTool.index()]); got != `"unauthorized_tool"` {
		t.Errorf("violationJSON of unauthorizedTool = %s", got)
	}
	if got := string(passedJSON[b2i(true)]) + string(passedJSON[b2i(false)]); got != `","passed":true}","passed":false}` {
		t.Errorf("passedJSON = %s", got)
	}
	for _, ps := range [][][]byte{statusJSON, violationJSON, passedJSON} {
		for _, p := range ps {
			if cap(p) < shortCopy {
				t.Errorf("piece %s has capacity %d: appendShort would copy it by append", p, cap(p))
			}
		}
	}
}
