package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/receipt"
	"github.com/evalmeter/evalmeter/server"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testAPI is a real API (server, ledger, PostgreSQL) on loopback HTTP for a
// test, with a client granted credits.
type testAPI struct {
	url, dbURL, key string
	stop            func()
}

// startAPI serves the API over dbURL until the test ends, signing session
// tokens with tokenSecret.
func startAPI(t *testing.T, dbURL, tokenSecret string, options ...func(*server.Config)) *testAPI {
	t.Helper()
	ctx := context.Background()
	if err := ledger.Migrate(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(ctx, dbURL, ledger.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := credential.NewTokenSigner([]byte(tokenSecret))
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Ledger: store, Tokens: tokens, Now: time.Now, Random: rand.Reader,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range options {
		o(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	stop := sync.OnceFunc(func() {
		ts.Close()
		store.Close()
	})
	t.Cleanup(stop)
	return &testAPI{url: ts.URL, dbURL: dbURL, stop: stop}
}

// publicKeySet is the key set of the private key in keyFile.
func publicKeySet(t *testing.T, keyFile string) *receipt.KeySet {
	t.Helper()
	key, err := receipt.ParsePrivateKey(mustReadBytes(t, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	return receipt.NewKeySet(receipt.NewSigner(key).Public())
}

// withReceipts signs metrics responses with the key in keyFile and
// publishes the public keys in retiredFile ("" for none) beside it.
func withReceipts(t *testing.T, keyFile, retiredFile string) func(*server.Config) {
	t.Helper()
	key, err := receipt.ParsePrivateKey(mustReadBytes(t, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	signer := receipt.NewSigner(key)
	keys := []ed25519.PublicKey{signer.Public()}
	if retiredFile != "" {
		retired, err := receipt.ParsePublicKeys(mustReadBytes(t, retiredFile))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, retired...)
	}
	return func(c *server.Config) { c.Receipts, c.ReceiptKeys = signer, receipt.NewKeySet(keys...) }
}

func mustReadBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// grant creates client acme with hours credits and sets its key in the
// environment, as a customer's CI would.
func (a *testAPI) grant(t *testing.T, hours int) {
	t.Helper()
	a.grantWith(t, ledger.Grant{AllocatedHours: hours})
}

// grantWith is grant with more of the grant's terms.
func (a *testAPI) grantWith(t *testing.T, g ledger.Grant) {
	t.Helper()
	g.ClientID, g.Source = "acme", "test"
	ctx, store := a.ledger(t)
	if _, err := store.UpsertClient(ctx, g, time.Now()); err != nil {
		t.Fatal(err)
	}
	key, err := credential.NewAPIKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := credential.HashAPIKey(key)
	if _, err := store.SetKey(ctx, "acme", hash, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	a.key = key
	t.Setenv(EnvAPIKey, key)
}

// consumed is the client's consumed credits, read from the ledger.
func (a *testAPI) consumed(t *testing.T) int {
	t.Helper()
	ctx, store := a.ledger(t)
	u, err := store.Usage(ctx, "acme", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return u.ConsumedHours
}

// ledger opens the test API's ledger, as the operator's tools would, for
// the rest of the test.
func (a *testAPI) ledger(t *testing.T) (context.Context, *ledger.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	store, err := ledger.Open(ctx, a.dbURL, ledger.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	return ctx, store
}

// evalmeter runs a customer command as the binary would.
func evalmeter(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	for _, c := range Commands() {
		if c.Name == args[0] {
			status := c.Run(args[1:], nil, &stdout, &stderr)
			return status, stdout.String(), stderr.String()
		}
	}
	t.Fatalf("no command %q", args[0])
	return 0, "", ""
}
