package credential

import (
	"bytes"
	"crypto/rand"
	"regexp"
	"strings"
	"testing"
)

func TestAPIKey(t *testing.T) {
	key, err := NewAPIKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^evk_[A-Za-z0-9_-]{43}$`).MatchString(key) {
		t.Fatalf("key %q is not evk_ and 43 base64url characters", key)
	}
	h1, err := HashAPIKey(key)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewAPIKey(rand.Reader)
	h2, _ := HashAPIKey(other)
	if h1 == h2 {
		t.Error("two keys hash alike")
	}
	if !strings.HasPrefix(h1.Fingerprint(), "sha256:") || strings.Contains(h1.Fingerprint(), key[4:12]) {
		t.Errorf("fingerprint %q", h1.Fingerprint())
	}
	for _, bad := range []string{"", "evk_", key[:len(key)-1], key + "A", "evs_" + key[4:], "evk_" + strings.Repeat("*", 43), strings.ToUpper(key[:4]) + key[4:]} {
		if _, err := HashAPIKey(bad); err != ErrMalformed {
			t.Errorf("HashAPIKey(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestSessionToken(t *testing.T) {
	k1 := bytes.Repeat([]byte{1}, 32)
	k2 := bytes.Repeat([]byte{2}, 32)
	old, err := NewTokenSigner(k1)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := NewTokenSigner(k2, k1)
	if err != nil {
		t.Fatal(err)
	}

	id, err := NewSessionID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sess_[a-f0-9]{24}$`).MatchString(id) {
		t.Fatalf("session id %q", id)
	}
	token, err := old.Token(id, old.CurrentKeyID())
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := old.Token(id, old.CurrentKeyID()); again != token {
		t.Error("the token of a session is not stable")
	}
	for name, signer := range map[string]*TokenSigner{"same key": old, "previous key after rotation": rotated} {
		if sessionID, keyID, ok := signer.Authenticate(token); !ok || sessionID != id || keyID != KeyID(k1) {
			t.Errorf("%s: Authenticate = %q, %q, %v; want %q signed by %q", name, sessionID, keyID, ok, id, KeyID(k1))
		}
	}
	if rotated.CurrentKeyID() != KeyID(k2) {
		t.Error("rotated signer does not sign with its first key")
	}
	if _, err := NewTokenSigner([]byte("short")); err == nil {
		t.Error("a 5-byte secret was accepted")
	}
	for _, bad := range []string{"", "evs_", "evs_!!!", token + "A"} {
		if _, _, ok := old.Authenticate(bad); ok {
			t.Errorf("Authenticate(%q) accepted a malformed token", bad)
		}
	}
}

func flipLast(token string) string {
	b := []byte(token)
	if b[len(b)-2] == 'A' {
		b[len(b)-2] = 'B'
	} else {
		b[len(b)-2] = 'A'
	}
	return string(b)
}

// TestAuthenticate: a token's HMAC is checked against every configured key
// without a lookup, and names the key that signed it.
func TestAuthenticate(t *testing.T) {
	k1 := bytes.Repeat([]byte{1}, 32)
	k2 := bytes.Repeat([]byte{2}, 32)
	k3 := bytes.Repeat([]byte{3}, 32)
	rotated, err := NewTokenSigner(k2, k1)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := NewSessionID(rand.Reader)
	signedBy := func(key []byte) string {
		s, err := NewTokenSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		token, err := s.Token(id, KeyID(key))
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	current, previous := signedBy(k2), signedBy(k1)

	tests := []struct {
		name      string
		token     string
		wantKeyID string // "" for a refusal
	}{
		{"current key", current, KeyID(k2)},
		{"previous key", previous, KeyID(k1)},
		{"a key not configured", signedBy(k3), ""},
		{"flipped mac byte", flipLast(current), ""},
		{"truncated", current[:len(current)-2], ""},
		{"one character more", current + "A", ""},
		{"api key prefix", "evk_" + current[4:], ""},
		{"not base64url", "evs_" + strings.Repeat("*", len(current)-4), ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		_, keyID, ok := rotated.Authenticate(tt.token)
		if ok != (tt.wantKeyID != "") || keyID != tt.wantKeyID {
			t.Errorf("%s: Authenticate = %q, %v; want %q", tt.name, keyID, ok, tt.wantKeyID)
		}
	}

	// The same secret given twice is one key.
	twice, err := NewTokenSigner(k1, k1)
	if err != nil {
		t.Fatal(err)
	}
	if _, keyID, ok := twice.Authenticate(previous); !ok || keyID != KeyID(k1) || len(twice.ids) != 1 {
		t.Errorf("a secret given twice: Authenticate = %q, %v with %d keys", keyID, ok, len(twice.ids))
	}
}
