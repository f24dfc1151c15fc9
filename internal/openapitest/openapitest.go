// Package openapitest checks HTTP requests and responses against api/openapi.yaml.
//
// A Validator is safe for concurrent use: it checks one message at a time,
// as libopenapi v0.36 renders schemas through shared state (the race
// detector caught it under concurrent tests). It reads request and response
// bodies to check them and puts an equivalent, unread body back, so a caller
// can still read (or send) them afterwards.
//
// Besides what libopenapi-validator checks (path and method, security, the
// Idempotency-Key header, the content type and schema of bodies, the status
// code, required response headers and their schemas), Request reports the
// rules that the document states in prose only (docs/design.md#52-the-order-of-checks):
//   - a query string on an operation that declares no query parameter
//     (every operation; 400 unexpected_query);
//   - a non-empty body on an operation that declares no request body
//     (GET schema, POST sessions, GET usage; 400 unexpected_body);
//   - a declared header parameter sent more than once (Idempotency-Key must
//     be exactly one header);
//   - a request body above metrics.MaxBodyBytes (413).
//
// Not checked, because JSON Schema cannot state them: a unique case_id per
// request and trace.observed_steps ≤ trace.expected_steps (422 from the
// service, valid under the MetricsRequest schema).
package openapitest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/logtest"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// Validator checks requests and responses against the OpenAPI document
// embedded as api.OpenAPI.
type Validator struct {
	mu    sync.Mutex // serializes every use of v
	v     validator.Validator
	model *v3.Document
}

// NewValidator parses api.OpenAPI, builds its OpenAPI 3.1 model and
// compiles its schemas. It fails if the document is not OpenAPI 3.1, does
// not validate against the OpenAPI 3.1 schema, or has any model-building
// error (libopenapi logs some of those instead of returning them, so they
// are captured from its logger).
func NewValidator() (*Validator, error) {
	var logged logtest.Buffer
	cfg := datamodel.NewDocumentConfiguration()
	cfg.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelError}))
	doc, err := libopenapi.NewDocumentWithConfiguration(api.OpenAPI, cfg)
	if err != nil {
		return nil, fmt.Errorf("contract: parse api/openapi.yaml: %w", err)
	}
	if info := doc.GetSpecInfo(); info == nil || info.SpecType != "openapi" || !strings.HasPrefix(info.Version, "3.1.") {
		return nil, fmt.Errorf("contract: api/openapi.yaml is not OpenAPI 3.1 (version %q)", doc.GetVersion())
	}
	m, err := doc.BuildV3Model()
	if err == nil && m == nil {
		err = errors.New("no model")
	}
	if err == nil && logged.Len() > 0 {
		err = errors.New(strings.TrimSpace(logged.String()))
	}
	if err != nil {
		return nil, fmt.Errorf("contract: build the model of api/openapi.yaml: %w", err)
	}
	if ok, verrs := schema_validation.ValidateOpenAPIDocument(doc); !ok {
		return nil, &Error{What: "document api/openapi.yaml", Violations: describe(verrs, nil)}
	}
	return &Validator{
		// Format assertions make format: date-time a check, not an annotation.
		v:     validator.NewValidatorFromV3Model(&m.Model, config.WithFormatAssertions()),
		model: &m.Model,
	}, nil
}

// Error lists every violation of one request or response. Its message has
// one violation per line.
type Error struct {
	What       string   // "request POST /api/svc/v1/metrics" or "response 401 to GET /api/svc/v1/usage"
	Violations []string // sorted, each readable on its own
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "contract: %s: %d violation(s) of api/openapi.yaml", e.What, len(e.Violations))
	for _, v := range e.Violations {
		b.WriteString("\n  - ")
		b.WriteString(strings.ReplaceAll(v, "\n", "\n    "))
	}
	return b.String()
}

// Request checks r against the document: path and method, bearer
// credential, Idempotency-Key, query, content type and body. It returns nil
// when r is valid and an *Error listing every violation otherwise. r.Body is
// read and replaced by an unread copy.
func (v *Validator) Request(r *http.Request) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	orig, getBody, contentLength := r.Body, r.GetBody, r.ContentLength
	body, err := readBody(&r.Body)
	defer func() {
		restoreBody(&r.Body, orig, body)
		r.GetBody, r.ContentLength = getBody, contentLength
	}()
	if err != nil {
		return &Error{What: "request " + r.Method + " " + r.URL.Path, Violations: []string{"reading the body: " + err.Error()}}
	}

	_, verrs := v.v.ValidateHttpRequestSync(r)
	violations := describe(verrs, body)
	violations = append(violations, v.prose(r, body)...)
	return v.result("request "+r.Method+" "+r.URL.Path, violations)
}

// Response checks resp as the answer to r: that the operation declares its
// status code, its content type and body, and its required headers. It
// returns nil when resp is valid and an *Error listing every violation
// otherwise. resp.Body is read and replaced by an unread copy; r.Body is not
// read.
func (v *Validator) Response(r *http.Request, resp *http.Response) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	what := fmt.Sprintf("response %d to %s %s", resp.StatusCode, r.Method, r.URL.Path)
	orig := resp.Body
	body, err := readBody(&resp.Body)
	defer restoreBody(&resp.Body, orig, body)
	if err != nil {
		return &Error{What: what, Violations: []string{"reading the body: " + err.Error()}}
	}
	header := resp.Header
	if header == nil {
		resp.Header = http.Header{}
		defer func() { resp.Header = header }()
	}

	_, verrs := v.v.ValidateHttpResponse(r, resp)
	return v.result(what, describe(verrs, body))
}

func (v *Validator) result(what string, violations []string) error {
	if len(violations) == 0 {
		return nil
	}
	slices.Sort(violations)
	return &Error{What: what, Violations: slices.Compact(violations)}
}

// prose reports what the matched operation breaks of the rules the document
// states in prose only (see the package comment).
func (v *Validator) prose(r *http.Request, body []byte) []string {
	item, errs, _ := paths.FindPath(r, v.model, nil)
	if item == nil || len(errs) > 0 {
		return nil // already reported by the library
	}
	op := item.GetOperations().GetOrZero(strings.ToLower(r.Method))
	if op == nil {
		return nil
	}
	params := slices.Concat(item.Parameters, op.Parameters)
	var out []string
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		if !slices.ContainsFunc(params, func(p *v3.Parameter) bool { return p.In == "query" }) {
			out = append(out, fmt.Sprintf("query string %q: the operation %s declares no query parameter (400 unexpected_query)", r.URL.RawQuery, op.OperationId))
		}
	}
	for _, p := range params {
		if n := len(r.Header.Values(p.Name)); p.In == "header" && n > 1 {
			out = append(out, fmt.Sprintf("header %s sent %d times: it must be exactly one header (400)", p.Name, n))
		}
	}
	switch {
	case op.RequestBody == nil && len(body) > 0:
		out = append(out, fmt.Sprintf("body of %d bytes: the operation %s declares no request body (400 unexpected_body)", len(body), op.OperationId))
	case len(body) > metrics.MaxBodyBytes:
		out = append(out, fmt.Sprintf("body of %d bytes: above the limit of %d bytes (413 payload_too_large)", len(body), metrics.MaxBodyBytes))
	}
	return out
}

// describe turns the library's errors into one readable entry each, with
// the location, reason and offending value (taken from body) of every
// schema failure.
func describe(errs []*verrors.ValidationError, body []byte) []string {
	var doc any
	decoded := false
	value := func(path []string) string {
		if !decoded {
			decoded = true
			if json.Unmarshal(body, &doc) != nil {
				doc = nil
			}
		}
		return valueAt(doc, path)
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		if e == nil {
			continue
		}
		var b strings.Builder
		b.WriteString(e.Message)
		if e.Reason != "" && e.Reason != e.Message {
			b.WriteString(": ")
			b.WriteString(e.Reason)
		}
		failures := slices.Clone(e.SchemaValidationErrors)
		slices.SortFunc(failures, func(a, b *verrors.SchemaValidationFailure) int {
			return cmp.Or(cmp.Compare(location(a), location(b)), cmp.Compare(a.Reason, b.Reason))
		})
		for _, f := range failures {
			if f == nil {
				continue
			}
			fmt.Fprintf(&b, "\n%s: %s", location(f), f.Reason)
			if e.ValidationSubType == helpers.Schema {
				// The value, unless the reason already shows it.
				if got := value(f.InstancePath); got != "" && !strings.Contains(f.Reason, strings.Trim(got, `"`)) {
					fmt.Fprintf(&b, "; got %s", got)
				}
			}
			if f.KeywordLocation != "" {
				fmt.Fprintf(&b, " (schema %s)", f.KeywordLocation)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// valueAt is the JSON of the scalar at path in doc, shortened; "" for an
// object, an array or a path that is not there.
func valueAt(doc any, path []string) string {
	for _, seg := range path {
		switch d := doc.(type) {
		case map[string]any:
			doc = d[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(d) {
				return ""
			}
			doc = d[i]
		default:
			return ""
		}
	}
	switch doc.(type) {
	case map[string]any, []any:
		return ""
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return ""
	}
	if len(raw) > 80 {
		return string(raw[:77]) + "..."
	}
	return string(raw)
}

// location is where in the instance a schema failure is, as a JSONPath.
func location(f *verrors.SchemaValidationFailure) string {
	switch {
	case f.FieldPath != "":
		return f.FieldPath
	case len(f.InstancePath) > 0:
		return "$." + strings.Join(f.InstancePath, ".")
	default:
		return "$"
	}
}

// readBody reads and closes *body and leaves an unread copy in its place
// (http.NoBody when empty, which the library needs instead of nil).
func readBody(body *io.ReadCloser) ([]byte, error) {
	if *body == nil || *body == http.NoBody {
		*body = http.NoBody
		return nil, nil
	}
	b, err := io.ReadAll(*body)
	if cerr := (*body).Close(); err == nil {
		err = cerr
	}
	restoreBody(body, http.NoBody, b)
	return b, err
}

// restoreBody sets *body to an unread copy of b; when b is empty, to orig if
// that was nil or http.NoBody, else to http.NoBody.
func restoreBody(body *io.ReadCloser, orig io.ReadCloser, b []byte) {
	switch {
	case len(b) > 0:
		*body = io.NopCloser(bytes.NewReader(b))
	case orig == nil:
		*body = nil
	default:
		*body = http.NoBody
	}
}
