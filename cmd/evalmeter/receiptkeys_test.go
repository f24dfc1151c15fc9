//go:build !customer

package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmeter/evalmeter/receipt"
)

// TestReceiptKeys: receipt-keys prints the JWK Set of the signing key and
// the retired ones, the document the API serves and verify --keys reads.
func TestReceiptKeys(t *testing.T) {
	dir := t.TempDir()
	var files []string
	var want []ed25519.PublicKey
	for _, name := range []string{"current.pem", "retired.pem"} {
		pub, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKCS8PrivateKey(key)
		p := filepath.Join(dir, name)
		os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
		files, want = append(files, p), append(want, pub)
	}
	var stdout, stderr bytes.Buffer
	if status := run([]string{"receipt-keys", "--receipt-key-file", files[0], "--receipt-retired-keys-file", files[1]}, nil, &stdout, &stderr); status != 0 {
		t.Fatalf("receipt-keys: %d %s", status, stderr.String())
	}
	wantJSON, _ := json.Marshal(receipt.NewKeySet(want...))
	var compact bytes.Buffer
	if err := json.Compact(&compact, stdout.Bytes()); err != nil || compact.String() != string(wantJSON) {
		t.Errorf("receipt-keys printed %s\nwant %s", stdout.String(), wantJSON)
	}
	stderr.Reset()
	if status := run([]string{"receipt-keys"}, nil, &stdout, &stderr); status != 2 || !strings.Contains(stderr.String(), "--receipt-key-file") {
		t.Errorf("receipt-keys without a key: %d\n%s", status, stderr.String())
	}
}
