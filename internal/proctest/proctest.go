// Package proctest runs evalmeter as a process for tests: built from the
// tree, on loopback addresses, against an envtest API server, as an
// operator would run it.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/evalmeter/evalmeter/internal/polltest"
)

// Build builds cmd/evalmeter of the module at root into the test's
// temporary directory and returns the binary's path.
func Build(t testing.TB, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "evalmeter")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/evalmeter")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Start runs bin with args and env (added to the test's) until the test
// ends, then stops it with SIGINT; its output is logged if the test failed.
func Start(t testing.TB, bin string, env []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		err := cmd.Wait()
		if t.Failed() {
			t.Logf("%s %s (%v):\n%s", filepath.Base(bin), args[0], err, out.String())
		}
	})
}

// Ports that FreeAddr picks from: below the ephemeral ranges of Linux
// (32768–60999) and macOS (49152–65535). A port that the kernel chose for
// a listener on port 0 is ephemeral, and between FreeAddr's return and the
// process's bind the kernel could give it to any outgoing connection of a
// test running in parallel ("address already in use"); these it never
// gives out by itself.
const (
	firstFreePort = 20000
	freePorts     = 12000
)

// FreeAddr is a loopback address that was free a moment ago, on a port
// outside the ephemeral range.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", firstFreePort+rand.IntN(freePorts))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatalf("no free port from %d to %d after 100 tries", firstFreePort, firstFreePort+freePorts-1)
	return ""
}

// WaitOK waits up to a minute for GET url to answer 200.
func WaitOK(t testing.TB, url string) {
	t.Helper()
	polltest.Until(t, time.Minute, url, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// Kubeconfig writes a kubeconfig of a new administrator (system:masters)
// of env, named user, and returns its path.
func Kubeconfig(t testing.TB, env *envtest.Environment, user string) string {
	t.Helper()
	u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	config, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
