// Package credential makes and checks evalmeter's two bearer credentials
// (docs/design.md#71-credentials): client API keys, of which only a SHA-256 is ever stored,
// and session tokens, which are derived from the session id with an HMAC
// and never stored at all.
package credential

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

const (
	apiKeyPrefix = "evk_"
	tokenPrefix  = "evs_"
	apiKeyBytes  = 32
	sessionBytes = 12
	// MinSecretBytes is the least key material accepted for session tokens.
	MinSecretBytes = 32
)

// ErrMalformed is a credential that is not even of the right shape; no
// lookup is needed to refuse it.
var ErrMalformed = errors.New("malformed credential")

// KeyHash is the SHA-256 of an API key, the only form of it that is stored.
type KeyHash [sha256.Size]byte

// NewAPIKey returns a new API key: "evk_" and 43 base64url characters
// holding 32 random bytes.
func NewAPIKey(random io.Reader) (string, error) {
	b := make([]byte, apiKeyBytes)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("generating an API key: %w", err)
	}
	return apiKeyPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashAPIKey checks the shape of key and returns its hash.
func HashAPIKey(key string) (KeyHash, error) {
	raw, ok := strings.CutPrefix(key, apiKeyPrefix)
	if !ok || base64.RawURLEncoding.EncodedLen(apiKeyBytes) != len(raw) {
		return KeyHash{}, ErrMalformed
	}
	if _, err := base64.RawURLEncoding.DecodeString(raw); err != nil {
		return KeyHash{}, ErrMalformed
	}
	return sha256.Sum256([]byte(key)), nil
}

// Fingerprint names a key in logs and status without revealing it.
func (h KeyHash) Fingerprint() string { return "sha256:" + hex.EncodeToString(h[:8]) }

// NewSessionID returns "sess_" and 24 lowercase hex characters (docs/design.md#34-session).
func NewSessionID(random io.Reader) (string, error) {
	b := make([]byte, sessionBytes)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("generating a session id: %w", err)
	}
	return "sess_" + hex.EncodeToString(b), nil
}

// TokenSigner derives session tokens: "evs_" + base64url(session id bytes ‖
// HMAC-SHA256(K, session id bytes)). Each session row keeps the id of the
// key that signed it, so the current key can rotate while older tokens
// stay valid as long as their key is still configured.
type TokenSigner struct {
	current string
	keys    map[string][]byte
	ids     []string // the keys of keys, current first: Authenticate tries them all
}

// NewTokenSigner signs with current and also accepts tokens signed with
// any of previous.
func NewTokenSigner(current []byte, previous ...[]byte) (*TokenSigner, error) {
	s := &TokenSigner{keys: map[string][]byte{}}
	for i, k := range append([][]byte{current}, previous...) {
		if len(k) < MinSecretBytes {
			return nil, fmt.Errorf("session token secret %d is %d bytes; it needs at least %d", i+1, len(k), MinSecretBytes)
		}
		id := KeyID(k)
		if _, dup := s.keys[id]; !dup {
			s.ids = append(s.ids, id)
		}
		s.keys[id] = k
	}
	s.current = KeyID(current)
	return s, nil
}

// KeyID names a token key: the first 4 bytes of its SHA-256, in hex.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// CurrentKeyID is the id of the key new sessions are signed with.
func (s *TokenSigner) CurrentKeyID() string { return s.current }

// Token returns the token of a session signed with key keyID.
func (s *TokenSigner) Token(sessionID, keyID string) (string, error) {
	id, err := sessionIDBytes(sessionID)
	if err != nil {
		return "", err
	}
	key, ok := s.keys[keyID]
	if !ok {
		return "", fmt.Errorf("session token key %s is not configured", keyID)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(append(id, mac(key, id)...)), nil
}

// Authenticate checks token's HMAC against every configured key and
// returns the session id it carries and the id of the key that signed it,
// or ok false. It needs no lookup, so a forged token costs no database
// work; the caller must still check that the session's row names the same
// key. Every key is tried, whichever matches, so the time taken does not
// tell which one did.
func (s *TokenSigner) Authenticate(token string) (sessionID, keyID string, ok bool) {
	raw, found := strings.CutPrefix(token, tokenPrefix)
	if !found || len(raw) != base64.RawURLEncoding.EncodedLen(sessionBytes+sha256.Size) {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return "", "", false
	}
	match := -1
	for i, id := range s.ids {
		equal := subtle.ConstantTimeCompare(b[sessionBytes:], mac(s.keys[id], b[:sessionBytes]))
		match = subtle.ConstantTimeSelect(equal, i, match)
	}
	if match < 0 {
		return "", "", false
	}
	return "sess_" + hex.EncodeToString(b[:sessionBytes]), s.ids[match], true
}

func mac(key, id []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(id)
	return h.Sum(nil)
}

func sessionIDBytes(id string) ([]byte, error) {
	raw, ok := strings.CutPrefix(id, "sess_")
	if !ok || len(raw) != 2*sessionBytes {
		return nil, fmt.Errorf("session id %q is not sess_ and 24 hex characters", id)
	}
	return hex.DecodeString(raw)
}
