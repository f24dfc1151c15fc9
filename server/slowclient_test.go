package server_test

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/polltest"
	"github.com/evalmeter/evalmeter/server"
)

// TestSlowClients: clients that trickle their headers byte by byte, or stall
// in the middle of a body, are cut at the server's bounds (ReadHeaderTimeout,
// ReadTimeout of server.HTTPServer, shortened here), a stalled body with a
// 400 that names no address; and while 50 of them hold connections, and a
// pool of 2 database connections, other clients are served.
func TestSlowClients(t *testing.T) {
	e := newEnv(t)
	queries := &queryTracer{}
	srv := e.server(ledger.Options{Timeout: 5 * time.Second, MaxConns: 2, Tracer: queries})
	hs := server.HTTPServer(srv.Handler(), log.New(io.Discard, "", 0))
	hs.ReadHeaderTimeout, hs.ReadTimeout = 3*time.Second, 4*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	addr := l.Addr().String()
	a := &api{t: t, url: "http://" + addr, client: &http.Client{Timeout: 20 * time.Second}}
	key := e.grant("acme", 30, nil)
	s := a.mustOpenSession(key, idem("s"))

	const trickling, stalling = 25, 25
	type slow struct {
		kind string
		conn net.Conn
		cut  atomic.Bool // the server closed or answered
		got  string      // what the server sent before closing
	}
	var (
		slows []*slow
		wg    sync.WaitGroup
	)
	dial := func(kind string) *slow {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second)) // the test's own bound
		c := &slow{kind: kind, conn: conn}
		slows = append(slows, c)
		t.Cleanup(func() { conn.Close() })
		return c
	}
	read := func(c *slow) {
		b, _ := io.ReadAll(c.conn) // until the server closes
		c.got = string(b)
		c.cut.Store(true)
	}
	for range trickling {
		c := dial("trickling headers")
		wg.Go(func() { read(c) })
		wg.Go(func() {
			// The request line at once, then a header one byte at a time,
			// never ending, until cut. net/http closes a connection cut in a
			// header line without an answer, but answers 400 to one cut in
			// the request line: written a byte at a time too, it took 2.75
			// of the 3 s, and a busy machine's sleeps made it 400s.
			if _, err := io.WriteString(c.conn, "POST /api/svc/v1/metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
				return
			}
			for !c.cut.Load() {
				if _, err := c.conn.Write([]byte{'a'}); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	// A session each, so that each stalled request reads its session from
	// the ledger (the API caches sessions it has read).
	tokens := make([]string, stalling)
	for i := range tokens {
		tokens[i] = a.mustOpenSession(key, idem(fmt.Sprintf("stall-session-%02d", i))).Session.Token
	}
	before := queries.ended.Load()
	for i := range stalling {
		c := dial("stalled body")
		fmt.Fprintf(c.conn, "POST /api/svc/v1/metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Idempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			tokens[i], idem(fmt.Sprintf("stall-%02d", i)), len(exampleBody), exampleBody[:10])
		wg.Go(func() { read(c) })
	}
	// Each stalled request looked its session up and now waits for its body.
	polltest.Until(t, 20*time.Second, "the stalled requests to pass authentication", func() error {
		if n := queries.ended.Load() - before; n < stalling {
			return fmt.Errorf("%d of %d looked their session up", n, stalling)
		}
		return nil
	})

	// Others are served meanwhile.
	if r := a.postMetrics(s.Session.Token, idem("meanwhile"), exampleBody); r.status != http.StatusOK {
		t.Errorf("a metrics request among the slow clients: %d %s", r.status, r.body)
	}
	if r := a.do(request{method: "GET", path: "/api/svc/v1/usage", bearer: key}); r.status != http.StatusOK {
		t.Errorf("a usage request among the slow clients: %d %s", r.status, r.body)
	}
	for _, c := range slows {
		if c.cut.Load() {
			t.Fatalf("a client with %s was cut before the others were served; the test's bounds are too short for this machine", c.kind)
		}
	}

	wg.Wait() // every slow connection cut by the server, or the test's 30 s bound
	if n := queries.connections(); n > 2 {
		t.Errorf("%d database connections served the requests; ledger.Options.MaxConns is 2", n)
	}
	for i, c := range slows {
		switch {
		case !c.cut.Load():
			t.Errorf("%s %d: never cut", c.kind, i)
		case c.kind == "trickling headers" && c.got != "":
			t.Errorf("%s %d: the server answered %q; want the connection closed", c.kind, i, c.got)
		case c.kind == "stalled body":
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(c.got)), nil)
			if err != nil {
				t.Errorf("%s %d: %v in %q", c.kind, i, err, c.got)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "send the whole body again") {
				t.Errorf("%s %d: %d %s; want 400 asking for the whole body", c.kind, i, resp.StatusCode, body)
			}
			if strings.Contains(string(body), "127.0.0.1") {
				t.Errorf("%s %d: the answer names an address: %s", c.kind, i, body)
			}
		}
	}
}
