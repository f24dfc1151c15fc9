package cli

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// EnvCacheFile names the environment variable that moves the session cache.
const EnvCacheFile = "EVALMETER_CACHE_FILE"

// maxCacheBytes bounds what is read of the cache file.
const maxCacheBytes = 1 << 20

// sessionCache is the file in which evalmeter submit keeps the client's open
// session between runs, so that runs within one window spend one credit.
//
// It is readable by its user only, and holds no API key: entries are found
// by a keyed fingerprint of the base URL and key, and the session token is
// sealed (AES-GCM) under a key derived from the API key, so the file alone
// gives no credential.
type sessionCache struct {
	path string
	fp   string // the entry of this base URL and API key
	seal cipher.AEAD
}

type cacheFile struct {
	Version int                    `json:"version"`
	Entries map[string]*cacheEntry `json:"entries"`
}

// cacheEntry is the state of one base URL and API key.
type cacheEntry struct {
	BaseURL string `json:"base_url"` // for the user reading the file
	// PendingKey is the Idempotency-Key of a session opening whose answer
	// has not arrived yet. It is written before the request, so that a
	// crash and a retry replay that opening instead of spending again.
	PendingKey  string    `json:"pending_key,omitempty"`
	SessionID   string    `json:"session_id,omitempty"`
	SealedToken string    `json:"sealed_token,omitempty"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
}

// defaultCachePath is the user's cache directory's evalmeter/sessions.json.
func defaultCachePath() (string, error) {
	if p := os.Getenv(EnvCacheFile); p != "" {
		return p, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory to keep the session in (%v): set %s", err, EnvCacheFile)
	}
	return filepath.Join(dir, "evalmeter", "sessions.json"), nil
}

func openSessionCache(path, baseURL, apiKey string) (*sessionCache, error) {
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, []byte(apiKey))
		m.Write([]byte(label + "\x00" + baseURL))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("evalmeter session cache seal"))
	if err != nil {
		return nil, err
	}
	seal, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sessionCache{path: path, fp: hex.EncodeToString(derive("evalmeter session cache entry")[:16]), seal: seal}, nil
}

// load returns this key's entry; an empty one when there is none.
func (c *sessionCache) load() (*cacheEntry, error) {
	f, err := c.read()
	if err != nil {
		return nil, err
	}
	if e := f.Entries[c.fp]; e != nil {
		return e, nil
	}
	return &cacheEntry{}, nil
}

func (c *sessionCache) read() (*cacheFile, error) {
	f := &cacheFile{Version: 1, Entries: map[string]*cacheEntry{}}
	data, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session cache: %v", err)
	}
	if len(data) > maxCacheBytes || json.Unmarshal(data, f) != nil || f.Entries == nil {
		// A damaged cache costs at most a credit: start afresh.
		return &cacheFile{Version: 1, Entries: map[string]*cacheEntry{}}, nil
	}
	return f, nil
}

// store replaces this key's entry, and drops the entries of sessions that
// have ended, writing the file atomically with mode 0600.
func (c *sessionCache) store(e *cacheEntry, now time.Time) error {
	f, err := c.read()
	if err != nil {
		return err
	}
	for fp, old := range f.Entries {
		if old.PendingKey == "" && now.After(old.ExpiresAt) {
			delete(f.Entries, fp)
		}
	}
	f.Entries[c.fp] = e
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return fmt.Errorf("session cache: %v", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".sessions-*.json")
	if err != nil {
		return fmt.Errorf("session cache: %v", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("session cache: %v", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		return fmt.Errorf("session cache: %v", err)
	}
	return nil
}

// sealToken encrypts a session token for the cache.
func (c *sessionCache) sealToken(sessionID, token string) string {
	nonce := make([]byte, c.seal.NonceSize())
	rand.Read(nonce)
	out := c.seal.Seal(nonce, nonce, []byte(token), []byte(sessionID))
	return base64.RawURLEncoding.EncodeToString(out)
}

// openToken decrypts a cached token; ok is false when it cannot be.
func (c *sessionCache) openToken(e *cacheEntry) (string, bool) {
	data, err := base64.RawURLEncoding.DecodeString(e.SealedToken)
	if err != nil || len(data) < c.seal.NonceSize() {
		return "", false
	}
	n := c.seal.NonceSize()
	token, err := c.seal.Open(nil, data[:n], data[n:], []byte(e.SessionID))
	if err != nil {
		return "", false
	}
	return string(token), true
}
