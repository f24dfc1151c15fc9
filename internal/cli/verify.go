package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/receipt"
)

const verifyUsage = `verify (--service BASE | --keys FILE | --keys-url URL) [--request FILE] RECEIPT

Checks a receipt of evalmeter submit --receipt: that a key you trust signed
the response (RFC 9421, Ed25519), that its Content-Digest is the body's and,
with --request, that the metrics are those of that request (its canonical
digest, recomputed here).

Name the keys you trust; a receipt cannot vouch for its own key set:
  --service BASE  the service's key set, BASE/.well-known/evalmeter/receipt-keys.json,
                  and the receipt must answer a request to BASE
  --keys FILE     a JWK Set (as evalmeter receipt-keys prints it) or PEM
                  public keys, offline
  --keys-url URL  a JWK Set published elsewhere (the operator's site)

A receipt proves that the holder of the key computed these metrics, at the
time it names, for the client and session it names, from a payload with
that digest. It does not prove that the observations are true.

Exit status: 0 when every check holds; 1 when one fails (it is named);
2 when a file, the key set or the command line cannot be read.`

// verifyCmd is evalmeter verify.
func verifyCmd(args []string, stdout, stderr io.Writer) int {
	fs := NewFlagSet("verify", verifyUsage, stderr)
	service := fs.String("service", "", "the service whose published keys you trust, e.g. https://evalmeter.example.com")
	keysFile := fs.String("keys", "", "the key set you trust: a JWK Set or PEM public keys (offline)")
	keysURL := fs.String("keys-url", "", "fetch the key set you trust from this URL")
	requestFile := fs.String("request", "", "the metrics request the receipt answers: check its canonical digest")
	if status, ok := ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() != 1 {
		return Failf(stderr, "verify: name one receipt file, e.g. evalmeter verify receipt.json")
	}
	switch n := btoi(*service != "") + btoi(*keysFile != "") + btoi(*keysURL != ""); {
	case n == 0:
		return Failf(stderr, "verify: name the keys you trust: --service https://SERVICE (its published key set), --keys FILE or --keys-url URL; a receipt cannot vouch for its own key set")
	case n > 1:
		return Failf(stderr, "verify: use one of --service, --keys and --keys-url")
	}
	b, err := readBounded(fs.Arg(0), 1<<20)
	if err != nil {
		return Failf(stderr, "verify: %v", err)
	}
	file, err := receipt.ParseFile(b)
	if err != nil {
		return Failf(stderr, "verify: %s: %v", fs.Arg(0), err)
	}
	if *service != "" {
		base := strings.TrimRight(*service, "/")
		if !strings.HasPrefix(file.Request.TargetURI, base+api.Prefix+"/") {
			fmt.Fprintf(stderr, "evalmeter verify: FAILED: service: the receipt answers a request to %s, not to the service %s\n", file.Request.TargetURI, base)
			return 1
		}
		*keysURL = base + "/.well-known/evalmeter/receipt-keys.json"
	}
	keys, source, err := loadKeySet(*keysFile, *keysURL)
	if err != nil {
		return Failf(stderr, "verify: %v", err)
	}
	m, body := file.Message()
	v, err := receipt.Verify(m, body, keys)
	if err != nil {
		fmt.Fprintf(stderr, "evalmeter verify: FAILED: %v\n", err)
		return 1
	}
	var env api.MetricsEnvelope
	if err := json.Unmarshal(body, &env); err != nil || env.Metrics.Integrity.CanonicalSHA256 == "" {
		fmt.Fprintf(stderr, "evalmeter verify: FAILED: body: the signed body is not a metrics response\n")
		return 1
	}
	if *requestFile != "" {
		req, err := readBounded(*requestFile, 1<<20)
		if err != nil {
			return Failf(stderr, "verify: --request: %v", err)
		}
		local, merr := checkRequest(req)
		if merr != nil {
			fmt.Fprintf(stderr, "evalmeter verify: FAILED: request: %s is not a valid metrics request: %s\n", *requestFile, merr.Message)
			return 1
		}
		if got := local.Integrity.CanonicalSHA256; got != env.Metrics.Integrity.CanonicalSHA256 {
			fmt.Fprintf(stderr, "evalmeter verify: FAILED: request: the canonical digest of %s is %s, but the receipt's metrics are of %s\n", *requestFile, got, env.Metrics.Integrity.CanonicalSHA256)
			return 1
		}
	}
	fmt.Fprintf(stdout, "verified: the holder of key %s (from %s) signed this answer\n", v.KeyID, source)
	fmt.Fprintf(stdout, "  at       %s\n", v.Created.Format(time.RFC3339))
	fmt.Fprintf(stdout, "  client   %s, session %s\n", m.Header.Get(api.HeaderClient), m.Header.Get(api.HeaderSession))
	fmt.Fprintf(stdout, "  request  %s %s (status %d%s)\n", file.Request.Method, file.Request.TargetURI, file.Status, map[bool]string{true: ", a replay", false: ""}[env.IdempotentReplay])
	fmt.Fprintf(stdout, "  payload  canonical SHA-256 %s", env.Metrics.Integrity.CanonicalSHA256)
	if *requestFile != "" {
		fmt.Fprintf(stdout, " = %s", *requestFile)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "It proves who computed these metrics, when, for whom, from which payload; not that the observations are true.")
	return 0
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// loadKeySet reads the key set from a file or a URL.
func loadKeySet(file, keysURL string) (*receipt.KeySet, string, error) {
	if file != "" {
		b, err := readBounded(file, 1<<20)
		if err != nil {
			return nil, "", fmt.Errorf("--keys: %v", err)
		}
		if strings.HasPrefix(strings.TrimSpace(string(b)), "-----BEGIN") {
			pubs, err := receipt.ParsePublicKeys(b)
			if err != nil {
				return nil, "", fmt.Errorf("--keys %s: %v", file, err)
			}
			return receipt.NewKeySet(pubs...), file, nil
		}
		keys, err := receipt.ParseKeySet(b)
		if err != nil {
			return nil, "", fmt.Errorf("--keys %s: %v", file, err)
		}
		return keys, file, nil
	}
	u, err := url.Parse(keysURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, "", fmt.Errorf("the key set's URL %q is not an http(s) URL", keysURL)
	}
	hc := &http.Client{
		Timeout: 30 * time.Second,
		// A redirect may not leave https, nor go on for ever.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 || via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("refused redirect to %s", req.URL)
			}
			return nil
		},
	}
	resp, err := hc.Get(keysURL)
	if err != nil {
		return nil, "", fmt.Errorf("fetching the key set: %v (offline, give --keys FILE)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("fetching the key set: %s answered %s", keysURL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20+1))
	if err != nil {
		return nil, "", fmt.Errorf("fetching the key set: %v", err)
	}
	keys, err := receipt.ParseKeySet(b)
	if err != nil {
		return nil, "", fmt.Errorf("the key set at %s: %v", keysURL, err)
	}
	return keys, keysURL, nil
}

// receiptChecker checks each receipt of a submission against the key set
// of the service it was posted to, so that a receipt a third party could
// not verify is noticed now, not at an audit.
type receiptChecker struct {
	base   string
	stderr io.Writer
	keys   *receipt.KeySet
	err    error // fetching the key set
}

func (rc *receiptChecker) check(f *receipt.File, path string) {
	if f.Headers["signature"] == "" {
		fmt.Fprintf(rc.stderr, "evalmeter submit: warning: %s signs no receipts (its operator configured no receipt key): %s holds the answer unsigned, which no one can verify\n", rc.base, path)
		return
	}
	if rc.keys == nil && rc.err == nil {
		rc.keys, _, rc.err = loadKeySet("", rc.base+"/.well-known/evalmeter/receipt-keys.json")
	}
	if rc.err != nil {
		fmt.Fprintf(rc.stderr, "evalmeter submit: warning: the receipt is in %s, but it could not be checked: %v\n", path, rc.err)
		return
	}
	m, body := f.Message()
	if _, err := receipt.Verify(m, body, rc.keys); err != nil {
		fmt.Fprintf(rc.stderr, "evalmeter submit: warning: the receipt in %s does not verify against %s's key set (%v): a third party could not check it. If %s is not the URL the API signs under, its operator sets it (--public-url, receipts.publicURL)\n",
			path, rc.base, err, rc.base)
		return
	}
	fmt.Fprintf(rc.stderr, "evalmeter submit: the receipt is in %s, checked against %s's key set (evalmeter verify --service %s %s)\n", path, rc.base, rc.base, path)
}
