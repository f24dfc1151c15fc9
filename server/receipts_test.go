package server_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/receipt"
)

func newReceiptSigner(t *testing.T) *receipt.Signer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return receipt.NewSigner(key)
}

// receiptOf is the receipt of a metrics response to POST path at base.
func receiptOf(resp response, base string) *receipt.File {
	return receipt.NewFile(resp.status, resp.header, resp.body, http.MethodPost, base+"/api/svc/v1/metrics")
}

// TestReceipts: first answers and replays are signed, created is the time of
// each answer, and the key set that verifies them is served with no credential.
func TestReceipts(t *testing.T) {
	e := newEnv(t)
	retired := newReceiptSigner(t)
	e.receipts = newReceiptSigner(t)
	e.receiptKeys = receipt.NewKeySet(e.receipts.Public(), retired.Public())
	a := e.api()
	key := e.grant("acme", 3, nil)
	sess := a.mustOpenSession(key, idem("s1"))

	keysResp := a.do(request{method: "GET", path: "/.well-known/evalmeter/receipt-keys.json"})
	if keysResp.status != http.StatusOK {
		t.Fatalf("key set: %d %s", keysResp.status, keysResp.body)
	}
	keys, err := receipt.ParseKeySet(keysResp.body)
	if err != nil || len(keys.Keys) != 2 || keys.Keys[0].Kid != e.receipts.KeyID() || keys.Keys[1].Kid != retired.KeyID() {
		t.Fatalf("key set %s: %v", keysResp.body, err)
	}

	body := mustReadFile("../api/examples/metrics-request.json")
	first := a.postMetrics(sess.Session.Token, idem("m1"), body)
	e.clock.Advance(5 * time.Minute)
	replay := a.postMetrics(sess.Session.Token, idem("m1"), body)
	for i, tc := range []struct {
		resp    response
		created time.Time
	}{{first, newClock().Now()}, {replay, newClock().Now().Add(5 * time.Minute)}} {
		if tc.resp.status != http.StatusOK {
			t.Fatalf("metrics %d: %d %s", i, tc.resp.status, tc.resp.body)
		}
		if c, s := tc.resp.header.Get("Evalmeter-Client"), tc.resp.header.Get("Evalmeter-Session"); c != "acme" || s != sess.Session.ID {
			t.Errorf("metrics %d: Evalmeter-Client %q, Evalmeter-Session %q", i, c, s)
		}
		m, b := receiptOf(tc.resp, a.url).Message()
		v, err := receipt.Verify(m, b, keys)
		if err != nil || v.KeyID != e.receipts.KeyID() || !v.Created.Equal(tc.created) {
			t.Errorf("metrics %d: Verify = %+v, %v; want created %s", i, v, err, tc.created)
		}
	}
	if string(first.header.Get("Signature")) == string(replay.header.Get("Signature")) {
		t.Error("the replay carries the first answer's signature")
	}

	// The signed URI is the request's: another host fails the signature.
	m, b := receiptOf(first, "http://evalmeter.example.com").Message()
	var ce *receipt.CheckError
	if _, err := receipt.Verify(m, b, keys); !errors.As(err, &ce) || ce.Check != receipt.CheckSignature {
		t.Errorf("another target URI: %v", err)
	}
}

// TestReceiptsPublicURL: behind an ingress, the signed target URI is under
// the public URL the clients use.
func TestReceiptsPublicURL(t *testing.T) {
	e := newEnv(t)
	e.receipts = newReceiptSigner(t)
	e.publicURL = "https://evalmeter.example.com/"
	a := e.api()
	sess := a.mustOpenSession(e.grant("acme", 3, nil), idem("s1"))
	resp := a.postMetrics(sess.Session.Token, idem("m1"), mustReadFile("../api/examples/metrics-request.json"))
	m, b := receiptOf(resp, "https://evalmeter.example.com").Message()
	if _, err := receipt.Verify(m, b, receipt.NewKeySet(e.receipts.Public())); err != nil {
		t.Error(err)
	}
}

// TestReceiptsOff: without a key the API serves, names the client and the
// session, and signs nothing; the key set is a 404 that says why.
func TestReceiptsOff(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	sess := a.mustOpenSession(e.grant("acme", 3, nil), idem("s1"))
	resp := a.postMetrics(sess.Session.Token, idem("m1"), mustReadFile("../api/examples/metrics-request.json"))
	if resp.status != http.StatusOK || resp.header.Get("Evalmeter-Client") != "acme" || resp.header.Get("Signature") != "" || resp.header.Get("Content-Digest") != "" {
		t.Errorf("metrics: %d %v", resp.status, resp.header)
	}
	keys := a.do(request{method: "GET", path: "/.well-known/evalmeter/receipt-keys.json"})
	if keys.status != http.StatusNotFound || keys.errorCode(t) != "not_found" {
		t.Errorf("key set without a key: %d %s", keys.status, keys.body)
	}
}

// TestReceiptSigningFails: a response that cannot be signed (here an
// HTTP/1.0 request with no Host, so no target URI) is answered unsigned: the
// metrics are recorded, and a 500 would lose them for the client.
func TestReceiptSigningFails(t *testing.T) {
	e := newEnv(t)
	e.receipts = newReceiptSigner(t)
	a := e.api()
	sess := a.mustOpenSession(e.grant("acme", 3, nil), idem("s1"))
	h := e.server(ledger.Options{Timeout: 5 * time.Second}).Handler()
	r := httptest.NewRequest("POST", "/api/svc/v1/metrics", bytes.NewReader(mustReadFile("../api/examples/metrics-request.json")))
	r.Host = ""
	r.Header.Set("Authorization", "Bearer "+sess.Session.Token)
	r.Header.Set("Idempotency-Key", idem("m1"))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || w.Header().Get("Signature") != "" || w.Header().Get("Content-Digest") != "" || w.Header().Get("Evalmeter-Client") != "acme" {
		t.Errorf("%d %v\n%s", w.Code, w.Header(), w.Body)
	}
	if !strings.Contains(e.logs.String(), `"msg":"metrics response not signed"`) {
		t.Errorf("no log line says the response went unsigned:\n%s", e.logs)
	}
}
