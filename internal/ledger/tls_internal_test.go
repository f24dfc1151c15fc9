package ledger

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
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

// writeCA writes a new self-signed CA certificate named cn to path.
func writeCA(t *testing.T, path, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert
}
