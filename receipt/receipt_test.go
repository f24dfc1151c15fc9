package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/evalmeter/evalmeter/api"
	"github.com/yaronf/httpsign"
)

// RFC 9421 Appendix B.1.4, test-key-ed25519.
const rfcKeyPEM = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----`

// TestRFC9421Ed25519 reproduces RFC 9421 Appendix B.2.6: the signature base
// of the test request and its Ed25519 signature with test-key-ed25519.
func TestRFC9421Ed25519(t *testing.T) {
	key, err := ParsePrivateKey([]byte(rfcKeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	m := &Message{
		Method:    "POST",
		TargetURI: "https://example.com/foo?param=Value&Pet=dog",
		Header: http.Header{
			"Date":           {"Tue, 20 Apr 2021 02:07:55 GMT"},
			"Content-Type":   {"application/json"},
			"Content-Digest": {"sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"},
			"Content-Length": {"18"},
		},
	}
	components := []Component{{Name: "date"}, {Name: "@method"}, {Name: "@path"}, {Name: "@authority"}, {Name: "content-type"}, {Name: "content-length"}}
	params := httpsfv.NewParams()
	params.Add("created", int64(1618884473))
	params.Add("keyid", "test-key-ed25519")
	input, err := innerList(components, params)
	if err != nil {
		t.Fatal(err)
	}
	if want := `("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`; input != want {
		t.Fatalf("signature params\n%s\nwant\n%s", input, want)
	}
	base, err := SignatureBase(m, components, input)
	if err != nil {
		t.Fatal(err)
	}
	wantBase := `"date": Tue, 20 Apr 2021 02:07:55 GMT
"@method": POST
"@path": /foo
"@authority": example.com
"content-type": application/json
"content-length": 18
"@signature-params": ("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`
	if base != wantBase {
		t.Fatalf("signature base\n%s\nwant\n%s", base, wantBase)
	}
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(base)))
	if want := "wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw=="; sig != want {
		t.Errorf("signature %s, want %s", sig, want)
	}
}

// TestKeyID: RFC 8037 Appendix A.3, the thumbprint of its example key.
func TestKeyID(t *testing.T) {
	x, _ := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if got, want := KeyID(x), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Errorf("KeyID = %s, want %s", got, want)
	}
}

// signed is a signed metrics response and its body.
func signed(t *testing.T, s *Signer, created time.Time) (*Message, []byte) {
	t.Helper()
	body := []byte(`{"metrics":{"case_count":1},"idempotent_replay":false}`)
	m := &Message{
		Status: 200,
		Header: http.Header{
			"Content-Type":      {"application/json"},
			"Evalmeter-Client":  {"acme"},
			"Evalmeter-Session": {"sess_0123456789abcdef01234567"},
		},
		Method:    "POST",
		TargetURI: "https://evalmeter.example.com/api/svc/v1/metrics",
	}
	if err := s.Sign(m, body, created); err != nil {
		t.Fatal(err)
	}
	return m, body
}

func newKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignVerify(t *testing.T) {
	s := NewSigner(newKey(t))
	created := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	m, body := signed(t, s, created)
	if got := m.Header.Get("Signature-Input"); !strings.HasPrefix(got, `evalmeter=("@status" "content-type" "content-digest" "evalmeter-client" "evalmeter-session" "@method";req "@target-uri";req);created=1795600800;keyid="`+s.KeyID()+`";alg="ed25519"`) {
		t.Errorf("Signature-Input: %s", got)
	}
	keys := NewKeySet(s.Public())
	v, err := Verify(m, body, keys)
	if err != nil || v.KeyID != s.KeyID() || !v.Created.Equal(created) {
		t.Fatalf("Verify = %+v, %v", v, err)
	}

	for _, tc := range []struct {
		name   string
		change func(m *Message, body *[]byte)
		check  string
	}{
		{"status", func(m *Message, _ *[]byte) { m.Status = 201 }, CheckSignature},
		{"content-type", func(m *Message, _ *[]byte) { m.Header.Set("Content-Type", "text/plain") }, CheckSignature},
		{"client", func(m *Message, _ *[]byte) { m.Header.Set(api.HeaderClient, "other") }, CheckSignature},
		{"session", func(m *Message, _ *[]byte) { m.Header.Set(api.HeaderSession, "sess_x") }, CheckSignature},
		{"content-digest", func(m *Message, body *[]byte) {
			*body = []byte(`{"metrics":{"case_count":2},"idempotent_replay":false}`)
			m.Header.Set("Content-Digest", ContentDigest(*body))
		}, CheckSignature},
		{"method", func(m *Message, _ *[]byte) { m.Method = "PUT" }, CheckSignature},
		{"target uri", func(m *Message, _ *[]byte) { m.TargetURI = "https://evil.example.com/api/svc/v1/metrics" }, CheckSignature},
		{"body", func(_ *Message, body *[]byte) { *body = bytes.Replace(*body, []byte("1"), []byte("9"), 1) }, CheckContentDigest},
		{"created", func(m *Message, _ *[]byte) {
			m.Header.Set("Signature-Input", strings.Replace(m.Header.Get("Signature-Input"), "created=1795600800", "created=1795600801", 1))
		}, CheckSignature},
		{"fewer components", func(m *Message, _ *[]byte) {
			m.Header.Set("Signature-Input", strings.Replace(m.Header.Get("Signature-Input"), ` "@target-uri";req`, "", 1))
		}, CheckCovered},
		{"unsigned", func(m *Message, _ *[]byte) { m.Header.Del("Signature") }, CheckSignatureFields},
		{"label twice in Signature-Input", func(m *Message, _ *[]byte) {
			m.Header.Set("Signature-Input", `evalmeter=("@status");created=1;keyid="x";alg="ed25519", `+m.Header.Get("Signature-Input"))
		}, CheckSignatureFields},
		{"label twice in Signature", func(m *Message, _ *[]byte) {
			m.Header.Add("Signature", m.Header.Get("Signature"))
		}, CheckSignatureFields},
		{"no digest", func(m *Message, _ *[]byte) { m.Header.Del("Content-Digest") }, CheckCovered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m2 := *m
			m2.Header = m.Header.Clone()
			b := bytes.Clone(body)
			tc.change(&m2, &b)
			_, err := Verify(&m2, b, keys)
			var ce *CheckError
			if !errors.As(err, &ce) || ce.Check != tc.check {
				t.Errorf("Verify = %v, want a failed %q check", err, tc.check)
			}
		})
	}

	other := NewSigner(newKey(t))
	if _, err := Verify(m, body, NewKeySet(other.Public())); err == nil || !strings.Contains(err.Error(), "key: key \""+s.KeyID()+"\" is not in the key set") {
		t.Errorf("a key not in the set: %v", err)
	}
}

// TestRotation: a receipt of a retired key still verifies with the set that
// publishes it beside the new key.
func TestRotation(t *testing.T) {
	old, current := NewSigner(newKey(t)), NewSigner(newKey(t))
	m, body := signed(t, old, time.Now())
	keys := NewKeySet(current.Public(), old.Public())
	if _, err := Verify(m, body, keys); err != nil {
		t.Error(err)
	}
	if keys.Keys[0].Kid != current.KeyID() {
		t.Errorf("the current key is not first: %+v", keys.Keys)
	}
}

// TestIndependentVerifier: github.com/yaronf/httpsign, an RFC 9421
// implementation written apart from this package, accepts a receipt.
func TestIndependentVerifier(t *testing.T) {
	key := newKey(t)
	m, body := signed(t, NewSigner(key), time.Now())
	u, _ := url.Parse(m.TargetURI)
	req := &http.Request{Method: m.Method, URL: u, Host: u.Host, Header: http.Header{}, TLS: nil}
	req.URL.Scheme = "https"
	res := &http.Response{StatusCode: m.Status, Header: m.Header, Body: io.NopCloser(bytes.NewReader(body))}
	fields := httpsign.NewFields().AddHeaders("@status", "content-type", "content-digest", "evalmeter-client", "evalmeter-session").
		AddHeaderExt("@method", false, false, true, false).AddHeaderExt("@target-uri", false, false, true, false)
	v, err := httpsign.NewEd25519Verifier(key.Public().(ed25519.PublicKey), httpsign.NewVerifyConfig().SetVerifyCreated(false), *fields)
	if err != nil {
		t.Fatal(err)
	}
	if err := httpsign.VerifyResponse(Label, *v, res, req); err != nil {
		t.Errorf("httpsign.VerifyResponse: %v", err)
	}
	res.Header = m.Header.Clone()
	res.Header.Set(api.HeaderClient, "other")
	if err := httpsign.VerifyResponse(Label, *v, res, req); err == nil {
		t.Error("httpsign accepted a changed client")
	}
}

func TestKeyFiles(t *testing.T) {
	key, err := ParsePrivateKey([]byte(rfcKeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := ParsePublicKeys([]byte(rfcKeyPEM + "\n-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=\n-----END PUBLIC KEY-----\n"))
	if err != nil || len(pubs) != 2 || !pubs[0].Equal(key.Public()) || !pubs[1].Equal(key.Public()) {
		t.Errorf("ParsePublicKeys = %v, %v", pubs, err)
	}
	for _, bad := range []string{"", "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=\n-----END PUBLIC KEY-----\n"} {
		if _, err := ParsePrivateKey([]byte(bad)); !errors.Is(err, ErrNoKey) {
			t.Errorf("ParsePrivateKey(%q) = %v", bad, err)
		}
	}

	ks := NewKeySet(key.Public().(ed25519.PublicKey), key.Public().(ed25519.PublicKey))
	if len(ks.Keys) != 1 {
		t.Errorf("a repeated key is published twice: %+v", ks)
	}
	if _, err := ParseKeySet([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","kid":"test-key-ed25519"}]}`)); err == nil || !strings.Contains(err.Error(), "is not its JWK thumbprint") {
		t.Errorf("a kid that is not the thumbprint: %v", err)
	}
}

// FuzzVerify: Signature-Input, Signature and Content-Digest values of a
// hostile receipt never panic Verify, and it never accepts a signature the
// key did not make.
func FuzzVerify(f *testing.F) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	s := NewSigner(key)
	body := []byte(`{"metrics":{},"idempotent_replay":false}`)
	m := &Message{Status: 200, Method: "POST", TargetURI: "https://e.example/api/svc/v1/metrics", Header: http.Header{
		"Content-Type": {"application/json"}, api.HeaderClient: {"acme"}, api.HeaderSession: {"sess_1"},
	}}
	if err := s.Sign(m, body, time.Unix(1795600800, 0)); err != nil {
		f.Fatal(err)
	}
	f.Add(m.Header.Get("Signature-Input"), m.Header.Get("Signature"), m.Header.Get("Content-Digest"))
	f.Add(`evalmeter=("@status";req "@query" "@path");created=-1;keyid="";alg="ed25519"`, `evalmeter=:AA==:`, `sha-256=:AA==:, sha-256=?1`)
	f.Add(`evalmeter=("x";bs;sf)`, `evalmeter=("a" "b")`, `sha-512=:x:`)
	keys := NewKeySet(s.Public())
	f.Fuzz(func(t *testing.T, input, signature, digest string) {
		h := m.Header.Clone()
		h.Set("Signature-Input", input)
		h.Set("Signature", signature)
		h.Set("Content-Digest", digest)
		fm := *m
		fm.Header = h
		v, err := Verify(&fm, body, keys)
		if err == nil && (signature != m.Header.Get("Signature") && !sameSignature(signature, m.Header.Get("Signature"))) {
			t.Errorf("a signature the key did not make was accepted: %q (%+v)", signature, v)
		}
	})
}

// sameSignature reports whether two Signature values carry the same bytes
// under Label (serializations may differ in whitespace and other members).
func sameSignature(a, b string) bool {
	sa, errA := parseSignature([]string{a})
	sb, errB := parseSignature([]string{b})
	return errA == nil && errB == nil && bytes.Equal(sa, sb)
}

// TestOpenSSLKeys: the key files openssl writes (genpkey -algorithm ed25519,
// pkey -pubout), made for this test, are read as one key.
func TestOpenSSLKeys(t *testing.T) {
	priv, err := os.ReadFile("testdata/openssl-ed25519.pem")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile("testdata/openssl-ed25519.pub.pem")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := ParsePublicKeys(pub)
	if err != nil || len(pubs) != 1 || KeyID(pubs[0]) != NewSigner(key).KeyID() {
		t.Errorf("ParsePublicKeys = %v, %v", pubs, err)
	}
}

// BenchmarkSign is the cost a receipt adds to a metrics response of 1 KB.
func BenchmarkSign(b *testing.B) {
	s := NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize)))
	body := bytes.Repeat([]byte("x"), 1024)
	created := time.Unix(1795600800, 0)
	for b.Loop() {
		m := &Message{Status: 200, Method: "POST", TargetURI: "https://evalmeter.example.com/api/svc/v1/metrics", Header: http.Header{
			"Content-Type": {"application/json"}, api.HeaderClient: {"acme"}, api.HeaderSession: {"sess_0123456789abcdef01234567"},
		}}
		if err := s.Sign(m, body, created); err != nil {
			b.Fatal(err)
		}
	}
}
