// Package polltest waits, in tests, for something that happens asynchronously:
// a controller's reconcile, a process starting.
package polltest

import (
	"testing"
	"time"
)

// Until calls check every 100 ms until it returns nil, and fails the test
// with check's last error, naming what, when timeout passes first.
func Until(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
