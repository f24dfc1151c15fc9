package proctest

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestFreeAddr checks that FreeAddr gives loopback addresses that can be
// listened on, on ports the kernel does not hand out by itself: a port
// from a listener on port 0 is ephemeral, and another test's outgoing
// connection could take it before the process under test binds.
func TestFreeAddr(t *testing.T) {
	ephemeral := 32768 // Linux's default lowest ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if low, err := strconv.Atoi(strings.Fields(string(b))[0]); err == nil {
			ephemeral = low
		}
	}
	for range 50 {
		addr := FreeAddr(t)
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("FreeAddr = %q", addr)
		}
		if n, _ := strconv.Atoi(port); n < 1024 || n >= ephemeral {
			t.Fatalf("FreeAddr = %q: the port is privileged or ephemeral (from %d)", addr, ephemeral)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr = %q, which cannot be listened on: %v", addr, err)
		}
		l.Close()
	}
}
