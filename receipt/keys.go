package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
)

// KeyID is the JWK thumbprint (RFC 7638) of an Ed25519 public key: the
// base64url SHA-256 of {"crv":"Ed25519","kty":"OKP","x":...}. Anyone can
// recompute it from the key, so a key id cannot be claimed by another key.
func KeyID(pub ed25519.PublicKey) string {
	canonical := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// ParsePrivateKey reads a PEM "PRIVATE KEY" (PKCS #8) Ed25519 key, as
// openssl genpkey -algorithm ed25519 writes it.
func ParsePrivateKey(pemBytes []byte) (ed25519.PrivateKey, error) {
	for rest := pemBytes; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fmt.Errorf("%w: no PEM PRIVATE KEY block (openssl genpkey -algorithm ed25519 writes one)", ErrNoKey)
		}
		if block.Type != "PRIVATE KEY" {
			continue
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the PRIVATE KEY block is not PKCS #8: %v", err)
		}
		key, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%w: the PRIVATE KEY is a %T; generate one with openssl genpkey -algorithm ed25519", ErrNoKey, k)
		}
		return key, nil
	}
}

// ParsePublicKeys reads the Ed25519 keys of PEM "PUBLIC KEY" blocks (as
// openssl pkey -pubout writes them) and of "PRIVATE KEY" blocks (their
// public halves), in order: the retired keys of a rotation.
func ParsePublicKeys(pemBytes []byte) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for rest := pemBytes; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch block.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("PUBLIC KEY block %d: %v", len(keys)+1, err)
			}
			pub, ok := k.(ed25519.PublicKey)
			if !ok {
				return nil, fmt.Errorf("PUBLIC KEY block %d is a %T, not Ed25519", len(keys)+1, k)
			}
			keys = append(keys, pub)
		case "PRIVATE KEY":
			priv, err := ParsePrivateKey(pem.EncodeToMemory(block))
			if err != nil {
				return nil, fmt.Errorf("PRIVATE KEY block %d: %v", len(keys)+1, err)
			}
			keys = append(keys, priv.Public().(ed25519.PublicKey))
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no PEM PUBLIC KEY or PRIVATE KEY block", ErrNoKey)
	}
	return keys, nil
}

// JWK is an Ed25519 public key as a JSON Web Key (RFC 8037).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use,omitempty"`
	Alg string `json:"alg,omitempty"`
}

// KeySet is a JWK Set (RFC 7517 §5) of the keys that sign receipts: the
// current one first, then the retired ones, which stay published so that
// old receipts can still be checked.
type KeySet struct {
	Keys []JWK `json:"keys"`
}

// NewKeySet is the set of keys, in order, without repeats.
func NewKeySet(keys ...ed25519.PublicKey) *KeySet {
	ks := &KeySet{Keys: []JWK{}}
	seen := map[string]bool{}
	for _, k := range keys {
		id := KeyID(k)
		if seen[id] {
			continue
		}
		seen[id] = true
		ks.Keys = append(ks.Keys, JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k), Kid: id, Use: "sig", Alg: "EdDSA"})
	}
	return ks
}

// maxKeySetBytes bounds a key set read from a file or a URL.
const maxKeySetBytes = 1 << 20

// ParseKeySet reads a JWK Set, keeping its OKP Ed25519 keys. A key whose kid
// is not its thumbprint is refused: a receipt names its key by thumbprint.
func ParseKeySet(b []byte) (*KeySet, error) {
	if len(b) > maxKeySetBytes {
		return nil, fmt.Errorf("the key set is larger than %d bytes", maxKeySetBytes)
	}
	var ks KeySet
	if err := json.Unmarshal(b, &ks); err != nil {
		return nil, fmt.Errorf("not a JWK Set: %v", err)
	}
	out := &KeySet{Keys: []JWK{}}
	for i, k := range ks.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" {
			continue
		}
		pub, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("key %d (kid %q): x is not a base64url Ed25519 public key", i+1, k.Kid)
		}
		if id := KeyID(pub); k.Kid != id {
			return nil, fmt.Errorf("key %d: kid %q is not its JWK thumbprint %q", i+1, k.Kid, id)
		}
		out.Keys = append(out.Keys, k)
	}
	if len(out.Keys) == 0 {
		return nil, fmt.Errorf("%w in the key set", ErrNoKey)
	}
	return out, nil
}

// Lookup is the public key of key id, nil when the set has none.
func (ks *KeySet) Lookup(id string) ed25519.PublicKey {
	if ks == nil {
		return nil
	}
	for _, k := range ks.Keys {
		if k.Kid != id {
			continue
		}
		pub, err := base64.RawURLEncoding.DecodeString(k.X)
		if err == nil && len(pub) == ed25519.PublicKeySize {
			return pub
		}
	}
	return nil
}
