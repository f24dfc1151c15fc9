package ledger

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/evalmeter/evalmeter/internal/certtest"
)

// TestReloadTLS: each new connection trusts the CA file as it is then, not
// as it was when the pool was made (a CA renewed in place, as
// CloudNativePG's is, replaces the mounted file).
func TestReloadTLS(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	url := "postgres://evalmeter@127.0.0.1:5432/evalmeter?sslmode=verify-full&sslrootcert=" + caFile
	first, second := writeCA(t, caFile, "first"), (*x509.Certificate)(nil)

	s, err := Open(t.Context(), url, Options{}) // connects lazily: no server needed
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg, hook := s.pool.Config().ConnConfig, s.pool.Config().BeforeConnect
	if hook == nil {
		t.Fatal("the pool reads the CA file once only")
	}
	for _, step := range []string{"the CA at start", "the renewed CA"} {
		want := first
		if second != nil {
			want = second
		}
		cc := cfg.Copy()
		if err := hook(t.Context(), cc); err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(want)
		if cc.TLSConfig == nil || !cc.TLSConfig.RootCAs.Equal(pool) {
			t.Errorf("%s: the connection does not trust exactly it", step)
		}
		if cc.TLSConfig.ServerName != "127.0.0.1" {
			t.Errorf("%s: server name %q, want the URL's host (verify-full)", step, cc.TLSConfig.ServerName)
		}
		second = writeCA(t, caFile, "renewed")
	}
}

// writeCA writes a new self-signed certificate named cn to path, as a CA
// file, and returns it.
func writeCA(t *testing.T, path, cn string) *x509.Certificate {
	t.Helper()
	certPEM, _ := certtest.SelfSigned(t, cn)
	if err := os.WriteFile(path, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
