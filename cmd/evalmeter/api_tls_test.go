//go:build !customer

package main

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/evalmeter/evalmeter/internal/certtest"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/proctest"
)

// TestAPIReloadsCertificate: evalmeter api serves a renewed certificate
// without a restart, when its files change as the kubelet changes a mounted
// Secret's: by swapping the ..data symlink to a new directory. Its ops
// listener reports PostgreSQL's health.
func TestAPIReloadsCertificate(t *testing.T) {
	// serveAPI gives certwatcher the API's logger; runAPI alone does not.
	ctrllog.SetLogger(logr.Discard())
	dir := t.TempDir()
	secret := newMountedSecret(t, dir)
	secret.write(certtest.SelfSigned(t, "evalmeter-before", "127.0.0.1"))

	addr, opsAddr := proctest.FreeAddr(t), proctest.FreeAddr(t)
	cfg := &apiConfig{
		addr: addr, opsAddr: opsAddr, databaseURL: pgtest.NewDatabase(t), migrate: true,
		tokenSecrets: [][]byte{[]byte(strings.Repeat("s", 32))}, dbTimeout: 2 * time.Second, grace: 5 * time.Second,
		tlsCert: filepath.Join(dir, "tls.crt"), tlsKey: filepath.Join(dir, "tls.key"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runAPI(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("api: %v", err)
		}
	}()

	// served is the common name of the certificate the API presents now.
	served := func() (string, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	waitServed := func(want string) {
		t.Helper()
		var got string
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got, err = served(); err == nil && got == want {
				return
			}
		}
		t.Fatalf("the API serves %q (%v), want %q", got, err, want)
	}
	waitServed("evalmeter-before")

	secret.write(certtest.SelfSigned(t, "evalmeter-renewed", "127.0.0.1"))
	waitServed("evalmeter-renewed")

	// The ops listener: ready, and PostgreSQL's health as a metric.
	resp, err := http.Get("http://" + opsAddr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %v %v", resp, err)
	}
	resp.Body.Close()
	var metrics []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err = http.Get("http://" + opsAddr + "/metrics"); err != nil {
			t.Fatal(err)
		}
		metrics, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(metrics), "\nevalmeter_postgres_up 1\n") {
			return
		}
	}
	t.Errorf("/metrics lacks evalmeter_postgres_up 1:\n%s", metrics)
}

// mountedSecret lays out files as the kubelet mounts a Secret: tls.crt and
// tls.key are symlinks through ..data, a symlink to a timestamped directory
// that each update replaces atomically.
type mountedSecret struct {
	t   *testing.T
	dir string
}

func newMountedSecret(t *testing.T, dir string) *mountedSecret {
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return &mountedSecret{t: t, dir: dir}
}

func (m *mountedSecret) write(certPEM, keyPEM []byte) {
	m.t.Helper()
	version := filepath.Join(m.dir, "..v"+time.Now().Format("150405.000000000"))
	if err := os.Mkdir(version, 0o755); err != nil {
		m.t.Fatal(err)
	}
	for name, content := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(version, name), content, 0o600); err != nil {
			m.t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(m.dir, "..data"))
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		m.t.Fatal(err)
	}
	if old != "" {
		os.RemoveAll(filepath.Join(m.dir, old))
	}
}
