package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/receipt"
	"github.com/evalmeter/evalmeter/server"
)

// writeKey writes a new PEM PKCS#8 Ed25519 key, as openssl genpkey does.
func writeKey(t *testing.T, dir, name string) string {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReceiptFlow: submit --receipt writes a receipt that verify accepts,
// online and offline, tied to its request; every change is caught and named.
func TestReceiptFlow(t *testing.T) {
	clearCI(t)
	dir := t.TempDir()
	keyFile := writeKey(t, dir, "receipt.pem")
	db := pgtest.NewDatabase(t)
	a := startAPI(t, db, strings.Repeat("s", 32), withReceipts(t, keyFile, ""))
	a.grant(t, 10)
	cache := filepath.Join(dir, "sessions")
	request := writeRequest(t, "run-1", "pass", "fail", "pass")
	first := filepath.Join(dir, "receipt.json")
	if status, stdout, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", cache, "--receipt", first, request); status != 0 ||
		!strings.Contains(stderr, "the receipt is in "+first+", checked against "+a.url+"'s key set") {
		t.Fatalf("submit: %d\n%s\n%s", status, stdout, stderr)
	}

	// The keys to trust are named: the receipt cannot vouch for its own.
	if status, _, stderr := evalmeter(t, "verify", first); status != 2 || !strings.Contains(stderr, "name the keys you trust") {
		t.Errorf("verify without keys: %d\n%s", status, stderr)
	}
	if status, _, stderr := evalmeter(t, "verify", "--service", "https://evalmeter.example.com", first); status != 1 ||
		!strings.Contains(stderr, "FAILED: service: the receipt answers a request to "+a.url+"/api/svc/v1/metrics, not to the service https://evalmeter.example.com") {
		t.Errorf("verify --service of another service: %d\n%s", status, stderr)
	}

	status, stdout, stderr := evalmeter(t, "verify", "--service", a.url, "--request", request, first)
	if status != 0 || !strings.Contains(stdout, "verified: the holder of key ") || !strings.Contains(stdout, "client   acme, session sess_") ||
		!strings.Contains(stdout, "request  POST "+a.url+"/api/svc/v1/metrics (status 200)") || !strings.Contains(stdout, " = "+request) {
		t.Fatalf("verify: %d\n%s\n%s", status, stdout, stderr)
	}

	// Offline, with the service's key set as a JWK Set (what evalmeter
	// receipt-keys prints: cmd/evalmeter's TestReceiptKeys).
	keysJSON, err := json.Marshal(publicKeySet(t, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys.json")
	os.WriteFile(keys, keysJSON, 0o600)
	if status, stdout, stderr := evalmeter(t, "verify", "--keys", keys, first); status != 0 || !strings.Contains(stdout, "(from "+keys+")") {
		t.Errorf("verify --keys: %d\n%s\n%s", status, stdout, stderr)
	}

	// A verifier written apart from this code, in another language, from the RFCs.
	if out, err := exec.Command("node", "../../docs/verify-receipt.mjs", first, keys).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "signature: valid; content-digest: matches the body") {
		t.Errorf("node docs/verify-receipt.mjs (Node.js is needed: apt-get install nodejs): %v\n%s", err, out)
	}

	// A replay is signed at its own time.
	second := filepath.Join(dir, "replay.json")
	if status, _, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", cache, "--receipt", second, request); status != 0 {
		t.Fatalf("second submit: %d\n%s", status, stderr)
	}
	if status, stdout, _ := evalmeter(t, "verify", "--keys", keys, second); status != 0 || !strings.Contains(stdout, "(status 200, a replay)") {
		t.Errorf("verify the replay: %d\n%s", status, stdout)
	}

	b, _ := os.ReadFile(first)
	var rec receipt.File
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	other := writeRequest(t, "run-2", "pass")
	for _, tc := range []struct {
		name   string
		change func(f *receipt.File)
		args   []string
		want   string
	}{
		{"body", func(f *receipt.File) { f.Body = strings.Replace(f.Body, `"case_count":3`, `"case_count":4`, 1) }, nil, "FAILED: content-digest: "},
		{"client", func(f *receipt.File) { f.Headers["evalmeter-client"] = "someone-else" }, nil, "FAILED: signature: "},
		{"session", func(f *receipt.File) { f.Headers["evalmeter-session"] = "sess_0" }, nil, "FAILED: signature: "},
		{"status", func(f *receipt.File) { f.Status = 201 }, nil, "FAILED: signature: "},
		{"target uri", func(f *receipt.File) { f.Request.TargetURI = "https://other.example/api/svc/v1/metrics" }, nil, "FAILED: signature: "},
		{"signature removed", func(f *receipt.File) { delete(f.Headers, "signature") }, nil, "FAILED: signature fields: the response has no Signature field"},
		{"another request", func(*receipt.File) {}, []string{"--request", other}, "FAILED: request: the canonical digest of " + other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f receipt.File
			json.Unmarshal(b, &f)
			tc.change(&f)
			changed := filepath.Join(t.TempDir(), "receipt.json")
			out, _ := json.Marshal(f)
			os.WriteFile(changed, out, 0o600)
			status, stdout, stderr := evalmeter(t, append(append([]string{"verify", "--keys", keys}, tc.args...), changed)...)
			if status != 1 || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("status %d, want 1 and %q\n%s%s", status, tc.want, stdout, stderr)
			}
			if tc.args == nil {
				if out, err := exec.Command("node", "../../docs/verify-receipt.mjs", changed, keys).CombinedOutput(); err == nil {
					t.Errorf("node docs/verify-receipt.mjs accepted it:\n%s", out)
				}
			}
		})
	}

	// After a rotation the new key signs, the old one stays published, and
	// the old receipt still verifies; a key outside the set does not.
	a.stop()
	newKey := writeKey(t, dir, "receipt-2.pem")
	b2 := startAPI(t, db, strings.Repeat("s", 32), withReceipts(t, newKey, keyFile))
	if status, stdout, stderr := evalmeter(t, "verify", "--keys-url", b2.url+"/.well-known/evalmeter/receipt-keys.json", first); status != 0 {
		t.Errorf("verify after the rotation: %d\n%s\n%s", status, stdout, stderr)
	}
	onlyNew, _ := json.Marshal(publicKeySet(t, newKey))
	newKeys := filepath.Join(dir, "new-keys.json")
	os.WriteFile(newKeys, onlyNew, 0o600)
	if status, _, stderr := evalmeter(t, "verify", "--keys", newKeys, first); status != 1 || !strings.Contains(stderr, "FAILED: key: key ") {
		t.Errorf("a key not in the set: %d\n%s", status, stderr)
	}
}

// TestReceiptsNotConfigured: without a key the API serves; submit --receipt
// says the answer is unsigned, and verify says it is not signed.
func TestReceiptsNotConfigured(t *testing.T) {
	clearCI(t)
	dir := t.TempDir()
	a := startAPI(t, pgtest.NewDatabase(t), strings.Repeat("s", 32))
	a.grant(t, 10)
	r := filepath.Join(dir, "receipt.json")
	status, _, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", filepath.Join(dir, "c"), "--receipt", r, writeRequest(t, "run", "pass"))
	if status != 0 || !strings.Contains(stderr, "signs no receipts (its operator configured no receipt key)") {
		t.Fatalf("submit: %d\n%s", status, stderr)
	}
	status, _, stderr = evalmeter(t, "verify", "--service", a.url, r)
	if status != 2 || !strings.Contains(stderr, "answered 404") {
		t.Errorf("verify: %d\n%s", status, stderr)
	}
}

// TestReceiptWrongPublicURL: an API that signs under another URL than the
// one the client used makes receipts no one can verify; submit says so at
// once, not at an audit.
func TestReceiptWrongPublicURL(t *testing.T) {
	clearCI(t)
	dir := t.TempDir()
	a := startAPI(t, pgtest.NewDatabase(t), strings.Repeat("s", 32), withReceipts(t, writeKey(t, dir, "receipt.pem"), ""), func(c *server.Config) {
		c.PublicURL = "https://evalmeter.example.com"
	})
	a.grant(t, 10)
	r := filepath.Join(dir, "receipt.json")
	status, _, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", filepath.Join(dir, "c"), "--receipt", r, writeRequest(t, "run", "pass"))
	if status != 0 || !strings.Contains(stderr, "warning: the receipt in "+r+" does not verify against "+a.url+"'s key set (signature: ") ||
		!strings.Contains(stderr, "its operator sets it (--public-url, receipts.publicURL)") {
		t.Errorf("submit: %d\n%s", status, stderr)
	}
}
