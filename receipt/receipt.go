// Package receipt signs evalmeter's metrics responses and verifies them, so
// that a third party can check that the service computed a set of metrics:
// HTTP Message Signatures (RFC 9421) with Ed25519 over a Content-Digest (RFC
// 9530), and the service's public keys as a JWK Set (RFC 7517, RFC 8037).
//
// A receipt proves that the holder of key K computed these metrics, at time
// T, for client C in session S, from a payload whose canonical digest is D.
// It does not prove that the observations in the payload are true.
//
// The signature base is built here, for the components RFC 9421 defines that
// a response and its request can have, and tested against the RFC's
// Ed25519 vector (Appendix B.2.6). Structured fields are parsed and
// serialized by github.com/dunglas/httpsfv.
package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// Label is the signature's name in Signature-Input and Signature.
const Label = "evalmeter"

// Component is a covered component of a signature: a field name in lower
// case or a derived component (@status, @method, ...), of the associated
// request when Req.
type Component struct {
	Name string
	Req  bool
}

func (c Component) String() string {
	s := strconv.Quote(c.Name)
	if c.Req {
		s += ";req"
	}
	return s
}

// Covered are the components a receipt's signature covers, in order.
var Covered = []Component{
	{Name: "@status"},
	{Name: "content-type"},
	{Name: "content-digest"},
	{Name: "evalmeter-client"},
	{Name: "evalmeter-session"},
	{Name: "@method", Req: true},
	{Name: "@target-uri", Req: true},
}

// Message is what a signature covers: a response (Status > 0) with its
// request, or a request alone.
type Message struct {
	Status int
	Header http.Header
	// Method and TargetURI are the request's: of the message itself when it
	// is a request, else of the request a response answers.
	Method    string
	TargetURI string
	// RequestHeader holds the request's fields, for components with ;req.
	RequestHeader http.Header
}

// ContentDigest is the Content-Digest field value of body (RFC 9530).
func ContentDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
}

// SignatureBase is the signature base of RFC 9421 §2.5: each component's
// line, then "@signature-params" with params, the serialized inner list of
// the components and their parameters.
func SignatureBase(m *Message, components []Component, params string) (string, error) {
	var b strings.Builder
	seen := map[Component]bool{}
	for _, c := range components {
		if seen[c] {
			return "", fmt.Errorf("component %s is covered twice", c)
		}
		seen[c] = true
		v, err := m.value(c)
		if err != nil {
			return "", err
		}
		b.WriteString(c.String())
		b.WriteString(": ")
		b.WriteString(v)
		b.WriteByte('\n')
	}
	b.WriteString(`"@signature-params": `)
	b.WriteString(params)
	return b.String(), nil
}

// value is a component's value (RFC 9421 §2.1 and §2.2).
func (m *Message) value(c Component) (string, error) {
	if c.Req && m.Status == 0 {
		return "", fmt.Errorf("component %s: ;req applies to a response's request", c)
	}
	isRequest := c.Req || m.Status == 0
	if !strings.HasPrefix(c.Name, "@") {
		h := m.Header
		if c.Req {
			h = m.RequestHeader
		}
		return fieldValue(h, c.Name)
	}
	if c.Name == "@status" {
		if isRequest {
			return "", fmt.Errorf("component %s: a request has no status", c)
		}
		return fmt.Sprintf("%03d", m.Status), nil
	}
	if !isRequest {
		return "", fmt.Errorf("component %s: a response has no %s of its own; cover it with ;req", c, c.Name)
	}
	if c.Name == "@method" {
		if m.Method == "" {
			return "", fmt.Errorf("component %s: no method", c)
		}
		return m.Method, nil
	}
	u, err := url.Parse(m.TargetURI)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return "", fmt.Errorf("component %s: the target URI %q is not an absolute http(s) URI", c, m.TargetURI)
	}
	switch c.Name {
	case "@target-uri":
		return m.TargetURI, nil
	case "@authority":
		return authority(u), nil
	case "@scheme":
		return strings.ToLower(u.Scheme), nil
	case "@path":
		if p := u.EscapedPath(); p != "" {
			return p, nil
		}
		return "/", nil
	case "@query":
		return "?" + u.RawQuery, nil
	case "@request-target":
		return u.RequestURI(), nil
	}
	return "", fmt.Errorf("component %s is not supported", c)
}

// authority is the host in lower case, and the port unless it is the
// scheme's default (RFC 9421 §2.2.3).
func authority(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" || u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
		return host
	}
	return host + ":" + port
}

// fieldValue is a field's value for the signature base: its lines trimmed
// and joined with ", " (RFC 9421 §2.1).
func fieldValue(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", fmt.Errorf("field %q is covered but not in the message", name)
	}
	trimmed := make([]string, len(vs)) // vs is the header's own slice
	for i, v := range vs {
		trimmed[i] = strings.Trim(v, " \t")
	}
	return strings.Join(trimmed, ", "), nil
}

// Signer signs responses with one key.
type Signer struct {
	key ed25519.PrivateKey
	id  string
	// The signature parameters around created, serialized once: they change
	// only with it.
	paramsHead, paramsTail string
}

// NewSigner signs with key; its key id is the key's JWK thumbprint.
func NewSigner(key ed25519.PrivateKey) *Signer {
	s := &Signer{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}
	params := httpsfv.NewParams()
	params.Add("created", int64(0))
	params.Add("keyid", s.id)
	params.Add("alg", "ed25519")
	input, err := innerList(Covered, params)
	if err != nil {
		panic(err) // constant components and a base64url key id always serialize
	}
	s.paramsHead, s.paramsTail, _ = strings.Cut(input, ";created=0")
	s.paramsHead += ";created="
	return s
}

// KeyID is the signer's key id.
func (s *Signer) KeyID() string { return s.id }

// Public is the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign signs the response m: it sets m's Content-Digest from body, then
// Signature-Input and Signature, covering Covered with created, keyid and
// alg. m.Header must hold Content-Type and the Evalmeter-Client and
// Evalmeter-Session fields.
func (s *Signer) Sign(m *Message, body []byte, created time.Time) error {
	m.Header.Set("Content-Digest", ContentDigest(body))
	input := s.paramsHead + strconv.FormatInt(created.Unix(), 10) + s.paramsTail
	base, err := SignatureBase(m, Covered, input)
	if err != nil {
		return err
	}
	sig := ed25519.Sign(s.key, []byte(base))
	m.Header.Set("Signature-Input", Label+"="+input)
	m.Header.Set("Signature", Label+"=:"+base64.StdEncoding.EncodeToString(sig)+":")
	return nil
}

// innerList serializes components and params as an RFC 8941 inner list.
func innerList(components []Component, params *httpsfv.Params) (string, error) {
	il := httpsfv.InnerList{Params: params}
	for _, c := range components {
		it := httpsfv.NewItem(c.Name)
		if c.Req {
			it.Params.Add("req", true)
		}
		il.Items = append(il.Items, it)
	}
	return httpsfv.Marshal(il)
}

// Verified is what a verified signature says.
type Verified struct {
	KeyID   string
	Created time.Time
}

// CheckError is a check that failed; Check names it.
type CheckError struct {
	Check string
	Err   error
}

func (e *CheckError) Error() string { return e.Check + ": " + e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

func failed(check, format string, args ...any) error {
	return &CheckError{Check: check, Err: fmt.Errorf(format, args...)}
}

// Checks, in the order Verify makes them.
const (
	CheckSignatureFields = "signature fields"
	CheckCovered         = "covered components"
	CheckKey             = "key"
	CheckSignature       = "signature"
	CheckContentDigest   = "content-digest"
)

// maxFieldBytes bounds the Signature-Input and Signature values read.
const maxFieldBytes = 8 << 10

// Verify checks the receipt signature of the response m, whose body is
// body, against keys: the signature labelled Label, covering at least
// Covered with created, keyid and alg="ed25519", by a key of the set; then
// that Content-Digest is body's. Its errors are *CheckError.
func Verify(m *Message, body []byte, keys *KeySet) (*Verified, error) {
	components, params, input, err := parseSignatureInput(m.Header.Values("Signature-Input"))
	if err != nil {
		return nil, err
	}
	sig, err := parseSignature(m.Header.Values("Signature"))
	if err != nil {
		return nil, err
	}
	covered := map[Component]bool{}
	for _, c := range components {
		covered[c] = true
	}
	for _, c := range Covered {
		if !covered[c] {
			return nil, failed(CheckCovered, "the signature does not cover %s", c)
		}
	}
	created, ok := params["created"].(int64)
	if !ok {
		return nil, failed(CheckSignatureFields, "Signature-Input has no integer created parameter")
	}
	if alg, ok := params["alg"].(string); !ok || alg != "ed25519" {
		return nil, failed(CheckSignatureFields, `Signature-Input's alg is %v, not "ed25519"`, params["alg"])
	}
	keyID, ok := params["keyid"].(string)
	if !ok {
		return nil, failed(CheckSignatureFields, "Signature-Input has no keyid parameter")
	}
	pub := keys.Lookup(keyID)
	if pub == nil {
		return nil, failed(CheckKey, "key %q is not in the key set", keyID)
	}
	base, err := SignatureBase(m, components, input)
	if err != nil {
		return nil, failed(CheckCovered, "%v", err)
	}
	if !ed25519.Verify(pub, []byte(base), sig) {
		return nil, failed(CheckSignature, "the signature does not verify with key %q: a signed field, the status or the request's method or target URI was changed", keyID)
	}
	if err := checkContentDigest(m.Header.Values("Content-Digest"), body); err != nil {
		return nil, err
	}
	return &Verified{KeyID: keyID, Created: time.Unix(created, 0).UTC()}, nil
}

// parseSignatureInput reads the signature labelled Label: its components,
// its parameters (integers and strings), and its serialization.
func parseSignatureInput(values []string) ([]Component, map[string]any, string, error) {
	if err := bounded("Signature-Input", values); err != nil {
		return nil, nil, "", err
	}
	d, err := httpsfv.UnmarshalDictionary(values)
	if err != nil {
		return nil, nil, "", failed(CheckSignatureFields, "Signature-Input is not a structured dictionary: %v", err)
	}
	member, ok := d.Get(Label)
	if !ok {
		return nil, nil, "", failed(CheckSignatureFields, "Signature-Input has no signature labelled %q", Label)
	}
	il, ok := member.(httpsfv.InnerList)
	if !ok {
		return nil, nil, "", failed(CheckSignatureFields, "Signature-Input's %q is not an inner list", Label)
	}
	var components []Component
	for _, it := range il.Items {
		name, ok := it.Value.(string)
		if !ok {
			return nil, nil, "", failed(CheckSignatureFields, "a covered component is not a string: %v", it.Value)
		}
		c := Component{Name: name}
		for _, p := range it.Params.Names() {
			v, _ := it.Params.Get(p)
			if p != "req" || v != true {
				return nil, nil, "", failed(CheckSignatureFields, "component %q has parameter %s, which receipts do not use", name, p)
			}
			c.Req = true
		}
		components = append(components, c)
	}
	params := map[string]any{}
	for _, p := range il.Params.Names() {
		params[p], _ = il.Params.Get(p)
	}
	input, err := httpsfv.Marshal(il)
	if err != nil {
		return nil, nil, "", failed(CheckSignatureFields, "Signature-Input: %v", err)
	}
	return components, params, input, nil
}

func parseSignature(values []string) ([]byte, error) {
	if err := bounded("Signature", values); err != nil {
		return nil, err
	}
	d, err := httpsfv.UnmarshalDictionary(values)
	if err != nil {
		return nil, failed(CheckSignatureFields, "Signature is not a structured dictionary: %v", err)
	}
	member, ok := d.Get(Label)
	if !ok {
		return nil, failed(CheckSignatureFields, "Signature has no signature labelled %q", Label)
	}
	it, ok := member.(httpsfv.Item)
	if !ok {
		return nil, failed(CheckSignatureFields, "Signature's %q is not a byte sequence", Label)
	}
	sig, ok := it.Value.([]byte)
	if !ok || len(sig) != ed25519.SignatureSize {
		return nil, failed(CheckSignatureFields, "Signature's %q is not an Ed25519 signature of %d bytes", Label, ed25519.SignatureSize)
	}
	return sig, nil
}

// bounded checks a signature field's size, and that Label names one member:
// a dictionary keeps the last of repeated members (RFC 8941), and other
// verifiers may take the first.
func bounded(name string, values []string) error {
	n := 0
	for _, v := range values {
		n += len(v)
	}
	switch {
	case len(values) == 0:
		return failed(CheckSignatureFields, "the response has no %s field: it is not signed", name)
	case n > maxFieldBytes:
		return failed(CheckSignatureFields, "%s is longer than %d bytes", name, maxFieldBytes)
	case len(labelMember.FindAllStringIndex(strings.Join(values, ","), -1)) > 1:
		return failed(CheckSignatureFields, "%s has the label %q twice", name, Label)
	}
	return nil
}

// labelMember finds a dictionary member named Label (conservatively: also
// inside a string parameter, which our signatures never have).
var labelMember = regexp.MustCompile(`(?:^|,)\s*` + Label + `\s*=`)

// checkContentDigest checks the sha-256 member of Content-Digest against body.
func checkContentDigest(values []string, body []byte) error {
	if len(values) == 0 {
		return failed(CheckContentDigest, "the response has no Content-Digest")
	}
	d, err := httpsfv.UnmarshalDictionary(values)
	if err != nil {
		return failed(CheckContentDigest, "Content-Digest is not a structured dictionary: %v", err)
	}
	member, ok := d.Get("sha-256")
	if !ok {
		return failed(CheckContentDigest, "Content-Digest has no sha-256 digest")
	}
	it, ok := member.(httpsfv.Item)
	want, ok2 := it.Value.([]byte)
	if !ok || !ok2 {
		return failed(CheckContentDigest, "Content-Digest's sha-256 is not a byte sequence")
	}
	got := sha256.Sum256(body)
	if string(got[:]) != string(want) {
		return failed(CheckContentDigest, "the body's SHA-256 is not the signed Content-Digest: the body was changed")
	}
	return nil
}

// ErrNoKey is returned when a key file holds no Ed25519 key.
var ErrNoKey = errors.New("no Ed25519 key")
