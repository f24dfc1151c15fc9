// Package pgtest starts throwaway PostgreSQL clusters for tests with hack/postgres.sh.
//
// Most tests want a database of their own in a cluster shared by the test binary:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		url := pgtest.NewDatabase(t) // dropped when the test ends
//		...
//	}
//
// Tests that stop PostgreSQL (outages) take a cluster of their own with NewCluster.
// With EVALMETER_TEST_DATABASE_URL set, NewDatabase creates its databases on that
// server instead of starting a cluster; its user needs the CREATEDB privilege.
//
// The clusters run from the machine's initdb and pg_ctl (hack/postgres.sh installs
// Debian's postgresql package when they are missing and it runs as root). If the
// test binary dies without cleaning up (a panic, a -timeout, a kill), a watchdog
// process stops the clusters that pgtest made and removes their directories.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDatabaseURL names the environment variable that points NewDatabase at an
// existing server instead of a cluster of its own.
const EnvDatabaseURL = "EVALMETER_TEST_DATABASE_URL"

// Bounds on every wait. Starting may include initdb and, on a fresh machine,
// installing PostgreSQL; the script bounds pg_ctl itself to 60 s.
const (
	startTimeout    = 10 * time.Minute
	stopTimeout     = 2 * time.Minute
	sqlTimeout      = time.Minute
	watchdogTimeout = 10 * time.Second
)

// maxIdentifier is PostgreSQL's NAMEDATALEN-1: longer names are truncated.
const maxIdentifier = 63

// A Cluster is a PostgreSQL cluster in a directory, run by hack/postgres.sh on
// 127.0.0.1.
type Cluster struct {
	dir string

	mu      sync.Mutex
	port    int
	url     string
	running bool

	watchdog *watchdog // nil unless pgtest made dir
}

// Start starts the cluster in dir on a free port, with initdb first when dir
// holds none, and creates its evalmeter database. When the cluster in dir
// already runs, Start returns it as it is, on its own port.
func Start(dir string) (*Cluster, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &Cluster{dir: abs}
	// The free port may be taken between our probe and postgres binding it (by
	// another test binary, say): try a new one then.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		err = c.start(port)
		if err == nil {
			return c, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "Address already in use") {
			return nil, err
		}
	}
}

// URL returns the URL of the cluster's evalmeter database.
func (c *Cluster) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.url
}

// Stop stops the cluster and keeps its data, for outage tests.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := runScript(stopTimeout, "stop", c.dir); err != nil {
		return err
	}
	c.running = false
	return nil
}

// Restart starts the cluster again, in the same directory on the same port.
func (c *Cluster) Restart() error {
	c.mu.Lock()
	port := c.port
	c.mu.Unlock()
	return c.start(port)
}

// Close stops the cluster and removes its directory.
func (c *Cluster) Close() error {
	err := c.Stop()
	// Remove dir even when Stop failed: a postmaster whose lock file is gone
	// shuts itself down within a minute.
	if rmErr := os.RemoveAll(c.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("pgtest: %w", rmErr))
	}
	if c.watchdog != nil {
		c.watchdog.disarm()
	}
	return err
}

// NewDatabase creates a database in the cluster, named after the test and unique,
// and returns its URL. The database is dropped when the test ends, unless the
// cluster is stopped then.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	return createDatabase(t, c.URL(), c.isRunning)
}

func (c *Cluster) start(port int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := runScript(startTimeout, "start", c.dir, strconv.Itoa(port))
	if err != nil {
		return err
	}
	// The port in the URL, not ours: a cluster already running keeps its own.
	u := strings.TrimSpace(out)
	parsed, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("pgtest: hack/postgres.sh start printed %q: %w", out, err)
	}
	p, err := strconv.Atoi(parsed.Port())
	if err != nil {
		return fmt.Errorf("pgtest: hack/postgres.sh start printed %q: no port", out)
	}
	c.port, c.url, c.running = p, u, true
	return nil
}

func (c *Cluster) isRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// The cluster shared by the tests of a test binary: started by the first
// NewDatabase, closed by Main.
var shared struct {
	once       sync.Once
	mainCalled atomic.Bool

	mu      sync.Mutex
	cluster *Cluster
	err     error
}

// Main runs the tests, for TestMain, then closes the shared cluster if one was
// started and exits with the tests' code (1 if the cluster could not be closed).
func Main(m *testing.M) {
	shared.mainCalled.Store(true)
	code := m.Run()
	shared.mu.Lock()
	c := shared.cluster
	shared.mu.Unlock()
	if c != nil {
		if err := c.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: close the shared PostgreSQL cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// NewDatabase creates a database for t in the test binary's shared cluster,
// started on first use, and returns its URL; the database is dropped when the
// test ends. With EVALMETER_TEST_DATABASE_URL set, the database is created on
// that server instead. The test binary's TestMain must call Main.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if !shared.mainCalled.Load() {
		t.Fatalf("pgtest: NewDatabase needs TestMain to call pgtest.Main(m), which stops the shared PostgreSQL cluster")
	}
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return createDatabase(t, u, func() bool { return true })
	}
	shared.once.Do(func() {
		c, err := newTempCluster()
		shared.mu.Lock()
		shared.cluster, shared.err = c, err
		shared.mu.Unlock()
	})
	shared.mu.Lock()
	c, err := shared.cluster, shared.err
	shared.mu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: start the shared PostgreSQL cluster: %v", err)
	}
	return c.NewDatabase(t)
}

// NewCluster starts a cluster for t alone, for tests that stop PostgreSQL, and
// closes it when the test ends.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := newTempCluster()
	if err != nil {
		t.Fatalf("pgtest: start a PostgreSQL cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("pgtest: close the PostgreSQL cluster: %v", err)
		}
	})
	return c
}

// newTempCluster starts a cluster in a new temporary directory, watched by a
// watchdog.
func newTempCluster() (*Cluster, error) {
	script, err := scriptPath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	// As root, the script hands dir to the postgres user, which must reach it.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	w, err := startWatchdog(script, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, err := Start(dir)
	if err != nil {
		// Leave nothing behind: a cluster may run when only createdb failed.
		runScript(stopTimeout, "stop", dir)
		os.RemoveAll(dir)
		w.disarm()
		return nil, err
	}
	c.watchdog = w
	return c, nil
}

// createDatabase creates a database for t on the server of adminURL and returns
// its URL; t's cleanup drops it when drop says the server runs.
func createDatabase(t testing.TB, adminURL string, drop func() bool) string {
	t.Helper()
	name := databaseName(t.Name())
	ident := pgx.Identifier{name}.Sanitize()
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("pgtest: parse the server URL: %v", err)
	}
	u.Path, u.RawPath = "/"+name, ""

	if err := execAdmin(adminURL, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !drop() {
			return
		}
		// FORCE: connections the test left open must not keep the database.
		if err := execAdmin(adminURL, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return u.String()
}

// Exec runs one statement on a connection of its own to url, for a test to
// change or inspect a database behind the code under test. It fails t when it
// cannot connect, and returns the rows the statement affected and its error.
func Exec(t testing.TB, url, sql string) (int64, error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, sql)
	return tag.RowsAffected(), err
}

// execAdmin runs one statement on its own connection to adminURL.
func execAdmin(adminURL, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

var databaseCounter atomic.Uint64

// databaseName returns a database name for the test: "pgtest_", the test name
// in [a-z0-9_], and a suffix unique in this process (a counter) and across
// processes sharing a server (random), in at most 63 bytes.
func databaseName(testName string) string {
	var b strings.Builder
	underscore := true // no leading underscore after the prefix
	for _, r := range strings.ToLower(testName) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			underscore = false
		} else if !underscore {
			b.WriteByte('_')
			underscore = true
		}
	}
	var random [4]byte
	rand.Read(random[:])
	suffix := fmt.Sprintf("_%d_%s", databaseCounter.Add(1), hex.EncodeToString(random[:]))
	const prefix = "pgtest_"
	base := strings.TrimRight(b.String(), "_")
	if room := maxIdentifier - len(prefix) - len(suffix); len(base) > room {
		base = strings.TrimRight(base[:room], "_") // ASCII: any byte is a boundary
	}
	if base == "" {
		base = "test"
	}
	return prefix + base + suffix
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// scriptPath finds hack/postgres.sh in the module holding the working directory.
func scriptPath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "hack", "postgres.sh"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("pgtest: no go.mod above the working directory, so no hack/postgres.sh")
		}
		dir = parent
	}
}

// runScript runs hack/postgres.sh with args and returns its stdout; errors
// carry its stderr.
func runScript(timeout time.Duration, args ...string) (string, error) {
	script, err := scriptPath()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Should a child keep our pipes open after the script is killed, stop waiting anyway.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w after %v", ctx.Err(), timeout)
		}
		return "", fmt.Errorf("pgtest: hack/postgres.sh %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// A watchdog is a process that stops the cluster in dir and removes dir when the
// test binary dies before Close: it reads a pipe whose write end only the test
// binary holds (close-on-exec), so end of file means the binary has exited.
type watchdog struct {
	w    *os.File // kept referenced: its finalizer would close it
	done chan struct{}
	once sync.Once
}

// watchdogScript ignores the interrupt that reaches the whole process group on ^C,
// to outlive the test binary. "done" disarms it. When the binary died during a
// start, that hack/postgres.sh may still run, and initdb recreate dir: a second
// pass cleans up after it (pg_ctl waits at most 60 s).
const watchdogScript = `trap '' INT TERM HUP
if IFS= read -r line && [ "$line" = done ]; then exit 0; fi
bash "$1" stop "$2" >/dev/null 2>&1
rm -rf "$2"
sleep 90
if [ -e "$2" ]; then
	bash "$1" stop "$2" >/dev/null 2>&1
	rm -rf "$2"
fi
`

func startWatchdog(script, dir string) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pgtest: watchdog: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("bash", "-c", watchdogScript, "pgtest-watchdog", script, dir)
	cmd.Stdin = r // stdout and stderr: /dev/null, so `go test` does not wait for it
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("pgtest: watchdog: %w", err)
	}
	wd := &watchdog{w: w, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(wd.done)
	}()
	return wd, nil
}

// disarm tells the watchdog to exit without doing anything.
func (wd *watchdog) disarm() {
	wd.once.Do(func() {
		wd.w.WriteString("done\n")
		wd.w.Close()
		select {
		case <-wd.done:
		case <-time.After(watchdogTimeout):
		}
	})
}
