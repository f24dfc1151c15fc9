package convert

import (
	"io"
	"sync"
)

// readAhead reads r in a goroutine of its own, a few blocks ahead of its
// caller, so that reading (a file's system calls, an .eval member's
// inflate) runs on another core beside the parse. close stops the
// goroutine and waits for it, so r may be closed after.
type readAhead struct {
	blocks chan []byte // read, in order; closed after the last
	free   chan []byte // consumed, to read into again
	cur    []byte      // the rest of the block being consumed
	buf    []byte      // that block's whole buffer
	err    error       // what ended the reading; set before blocks is closed
	stop   chan struct{}
	exited chan struct{}
	once   sync.Once
}

const (
	readAheadBlock  = 64 << 10
	readAheadBlocks = 4
)

// blockPool keeps blocks between readers: an .eval log has a member, and a
// reader, for each sample.
var blockPool = sync.Pool{New: func() any {
	b := make([]byte, readAheadBlock)
	return &b
}}

func newReadAhead(r io.Reader) *readAhead {
	a := &readAhead{
		blocks: make(chan []byte, readAheadBlocks),
		free:   make(chan []byte, readAheadBlocks),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	for range readAheadBlocks {
		a.free <- *blockPool.Get().(*[]byte)
	}
	go a.run(r)
	return a
}

func (a *readAhead) run(r io.Reader) {
	defer close(a.exited)
	defer close(a.blocks)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.stop:
			return
		}
		n, err := io.ReadFull(r, b)
		if n > 0 {
			a.blocks <- b[:n] // never blocks: there are only readAheadBlocks buffers
		}
		if err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF // a last block that is not full
			}
			a.err = err
			return
		}
	}
}

func (a *readAhead) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.buf != nil {
			a.free <- a.buf // never blocks, as above
			a.buf = nil
		}
		b, ok := <-a.blocks
		if !ok {
			return 0, a.err
		}
		a.cur, a.buf = b, b[:cap(b)]
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// close stops the reading and waits for the goroutine to end.
func (a *readAhead) close() {
	a.once.Do(func() {
		close(a.stop)
		<-a.exited
		if a.buf != nil {
			blockPool.Put(&a.buf)
		}
		for b := range a.blocks {
			b = b[:cap(b)]
			blockPool.Put(&b)
		}
		for len(a.free) > 0 {
			b := <-a.free
			blockPool.Put(&b)
		}
	})
}
