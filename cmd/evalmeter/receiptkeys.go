//go:build !customer

package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/evalmeter/evalmeter/internal/cli"
	"github.com/evalmeter/evalmeter/receipt"
)

// receiptKeyFlags are the flags of api and receipt-keys that name the
// receipt keys: the key that signs, and the retired ones still published.
type receiptKeyFlags struct {
	keyFile, retiredFile string
}

func (f *receiptKeyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.keyFile, "receipt-key-file", cli.EnvOr("EVALMETER_RECEIPT_KEY_FILE", ""),
		"PEM PKCS#8 Ed25519 private key that signs metrics responses (openssl genpkey -algorithm ed25519); none: responses are not signed (env EVALMETER_RECEIPT_KEY_FILE)")
	fs.StringVar(&f.retiredFile, "receipt-retired-keys-file", cli.EnvOr("EVALMETER_RECEIPT_RETIRED_KEYS_FILE", ""),
		"PEM public (or private) keys that signed receipts before, still published so that old receipts verify (env EVALMETER_RECEIPT_RETIRED_KEYS_FILE)")
}

// load reads the keys: nil, nil without a key file.
func (f *receiptKeyFlags) load() (*receipt.Signer, *receipt.KeySet, error) {
	if f.keyFile == "" {
		if f.retiredFile != "" {
			return nil, nil, errors.New("--receipt-retired-keys-file is published beside --receipt-key-file: set both, or neither")
		}
		return nil, nil, nil
	}
	b, err := os.ReadFile(f.keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--receipt-key-file: %w", err)
	}
	key, err := receipt.ParsePrivateKey(b)
	if err != nil {
		return nil, nil, fmt.Errorf("--receipt-key-file %s: %w", f.keyFile, err)
	}
	signer := receipt.NewSigner(key)
	keys := []ed25519.PublicKey{signer.Public()}
	if f.retiredFile != "" {
		b, err := os.ReadFile(f.retiredFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--receipt-retired-keys-file: %w", err)
		}
		retired, err := receipt.ParsePublicKeys(b)
		if err != nil {
			return nil, nil, fmt.Errorf("--receipt-retired-keys-file %s: %w", f.retiredFile, err)
		}
		keys = append(keys, retired...)
	}
	return signer, receipt.NewKeySet(keys...), nil
}

// parsePublicURL checks --public-url: an absolute http(s) URL with no query.
func parsePublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--public-url %q: give the base URL clients use, e.g. https://evalmeter.example.com", s)
	}
	return nil
}

const receiptKeysUsage = `receipt-keys --receipt-key-file FILE [--receipt-retired-keys-file FILE]

Prints the JWK Set of the receipt keys, as the API serves it at
/.well-known/evalmeter/receipt-keys.json, for an operator who publishes it
elsewhere as well (a web site, a transparency log).`

// receiptKeysCmd is evalmeter receipt-keys.
func receiptKeysCmd(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("receipt-keys", receiptKeysUsage, stderr)
	var kf receiptKeyFlags
	kf.register(fs)
	if status, ok := cli.ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() > 0 {
		return cli.Failf(stderr, "receipt-keys: unexpected argument %q", fs.Arg(0))
	}
	if kf.keyFile == "" {
		return cli.Failf(stderr, "receipt-keys: name the signing key with --receipt-key-file (or EVALMETER_RECEIPT_KEY_FILE)")
	}
	_, keys, err := kf.load()
	if err != nil {
		return cli.Failf(stderr, "receipt-keys: %v", err)
	}
	b, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return cli.Failf(stderr, "receipt-keys: %v", err)
	}
	stdout.Write(append(b, '\n'))
	return 0
}
