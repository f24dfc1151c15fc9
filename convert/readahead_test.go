package convert

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"
	"time"
)

func TestReadAhead(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, readAheadBlock - 1, readAheadBlock, readAheadBlock*readAheadBlocks*3 + 17} {
		in := make([]byte, size)
		for i := range in {
			in[i] = byte(rng.Uint32())
		}
		a := newReadAhead(&chunkedReader{r: bytes.NewReader(in), n: 1 + rng.IntN(70000)})
		got, err := io.ReadAll(&chunkedReader{r: a, n: 1 + rng.IntN(70000)})
		a.close()
		if err != nil || !bytes.Equal(got, in) {
			t.Errorf("%d bytes read ahead: got %d bytes, %v", size, len(got), err)
		}
	}
}

func TestReadAheadError(t *testing.T) {
	broken := errors.New("checksum error")
	in := bytes.Repeat([]byte("x"), readAheadBlock+5)
	a := newReadAhead(io.MultiReader(bytes.NewReader(in), iotest.ErrReader(broken)))
	defer a.close()
	got, err := io.ReadAll(a)
	if !errors.Is(err, broken) || !bytes.Equal(got, in) {
		t.Fatalf("got %d bytes, %v; want %d bytes, then %v", len(got), err, len(in), broken)
	}
}

// TestReadAheadClose stops a reader that has read ahead as far as it may:
// its goroutine must end, not wait for a consumer.
func TestReadAheadClose(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 50 {
		a := newReadAhead(bytes.NewReader(make([]byte, readAheadBlock*readAheadBlocks*2)))
		io.ReadFull(a, make([]byte, 10))
		a.close()
		a.close() // twice is harmless
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after closing, %d before", n, before)
	}
}
