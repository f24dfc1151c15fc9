package openapitest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/metrics"
	"github.com/evalmeter/evalmeter/internal/openapitest"
)

// base is where a test server listens: a host with a port and no path
// prefix, as httptest.NewServer gives.
const base = "http://127.0.0.1:43210"

// Credentials of the right shape, spelled out so that no literal in the
// tree looks like a real key.
var (
	apiKey       = "evk_" + strings.Repeat("A", 43)
	sessionToken = "evs_" + strings.Repeat("c2Vzc2lvbg", 5)
)

const idemKey = "run-2026-11-21:attempt.1"

var shared = sync.OnceValues(openapitest.NewValidator)

func newValidator(t *testing.T) *openapitest.Validator {
	t.Helper()
	v, err := shared()
	if err != nil {
		t.Fatalf("NewValidator: %v", err)
	}
	return v
}

// ---- the document ----------------------------------------------------------

func TestDocumentIsOpenAPI31(t *testing.T) {
	// NewValidator refuses a document that is not OpenAPI 3.1, fails the
	// OpenAPI 3.1 schema or logs any model-building error.
	if _, err := openapitest.NewValidator(); err != nil {
		t.Fatalf("NewValidator: %v", err)
	}

	doc, err := libopenapi.NewDocument(api.OpenAPI)
	if err != nil {
		t.Fatalf("NewDocument: %v", err)
	}
	info := doc.GetSpecInfo()
	if info.SpecType != "openapi" || info.Version != "3.1.0" {
		t.Fatalf("spec type %q version %q, want openapi 3.1.0", info.SpecType, info.Version)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("BuildV3Model: %v", err)
	}
	if m.Index != nil {
		if errs := m.Index.GetReferenceIndexErrors(); len(errs) > 0 {
			t.Errorf("reference errors: %v", errs)
		}
	}

	// The document itself against the OpenAPI 3.1 meta-schema.
	lv, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("NewValidator: %v", errs)
	}
	if ok, verrs := lv.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
		}
	}

	d := m.Model
	if d.Info.Title != "evalmeter" || d.Info.Version != "1.0.0-private-beta" {
		t.Errorf("info = %q %q", d.Info.Title, d.Info.Version)
	}
	for _, flag := range []string{
		"accepts_structured_observations_only = true",
		"executes_customer_commands = false",
		"calls_customer_targets = false",
		"accepts_prompts_or_model_responses = false",
		"accepts_customer_credentials_in_payload = false",
		"customer_reported_observations = true",
		"sha256_proves_payload_identity_only = true",
	} {
		if !strings.Contains(d.Info.Description, "- `"+flag+"`") {
			t.Errorf("info.description does not list the boundary flag %q", flag)
		}
	}
	if !strings.Contains(d.Info.Description, "proves payload identity only") {
		t.Errorf("info.description does not say the digest proves payload identity only")
	}

	for _, name := range []string{"apiKey", "sessionToken"} {
		s := d.Components.SecuritySchemes.GetOrZero(name)
		if s == nil || s.Type != "http" || s.Scheme != "bearer" {
			t.Errorf("security scheme %s = %+v, want http bearer", name, s)
		}
	}

	type op struct {
		path, method, security string
		idempotent, body       bool
		codes                  []string
	}
	want := map[string]op{
		"getSchema":   {"/api/svc/v1/schema", "get", "apiKey", false, false, []string{"200", "400", "401", "403", "503"}},
		"openSession": {"/api/svc/v1/sessions", "post", "apiKey", true, false, []string{"201", "400", "401", "402", "403", "503"}},
		"postMetrics": {"/api/svc/v1/metrics", "post", "sessionToken", true, true, []string{"200", "400", "401", "409", "413", "415", "422", "503"}},
		"getUsage":    {"/api/svc/v1/usage", "get", "apiKey", false, false, []string{"200", "400", "401", "403", "503"}},
		// Beside the four operations, outside /api/svc/v1: the receipt keys, public.
		"getReceiptKeys": {"/.well-known/evalmeter/receipt-keys.json", "get", "", false, false, []string{"200", "400", "404"}},
	}
	var pathsSeen []string
	seen := map[string]bool{}
	for path, item := range d.Paths.PathItems.FromOldest() {
		pathsSeen = append(pathsSeen, path)
		for method, o := range item.GetOperations().FromOldest() {
			w, ok := want[o.OperationId]
			if !ok || w.path != path || w.method != method {
				t.Errorf("unexpected operation %s %s %q", method, path, o.OperationId)
				continue
			}
			seen[o.OperationId] = true
			switch {
			case w.security == "": // public: an empty requirement list
				if o.Security == nil || len(o.Security) != 0 {
					t.Errorf("%s: security is not an empty list (public)", o.OperationId)
				}
			case len(o.Security) != 1 || o.Security[0].Requirements.Len() != 1 || !hasKey(o.Security[0].Requirements, w.security):
				t.Errorf("%s: security is not exactly %s", o.OperationId, w.security)
			}
			hasKey := slices.ContainsFunc(o.Parameters, func(p *v3.Parameter) bool {
				return p.Name == "Idempotency-Key" && p.In == "header" && p.Required != nil && *p.Required
			})
			if hasKey != w.idempotent {
				t.Errorf("%s: required Idempotency-Key header = %v, want %v", o.OperationId, hasKey, w.idempotent)
			}
			if (o.RequestBody != nil) != w.body {
				t.Errorf("%s: request body declared = %v, want %v", o.OperationId, o.RequestBody != nil, w.body)
			}
			if w.body && o.RequestBody != nil && (o.RequestBody.Required == nil || !*o.RequestBody.Required || o.RequestBody.Content.GetOrZero("application/json") == nil) {
				t.Errorf("%s: request body is not required application/json", o.OperationId)
			}
			if o.Responses == nil {
				t.Errorf("%s: no responses", o.OperationId)
				continue
			}
			codes := slices.Sorted(maps.Keys(maps.Collect(o.Responses.Codes.FromOldest())))
			if !slices.Equal(codes, w.codes) {
				t.Errorf("%s: responses %v, want %v", o.OperationId, codes, w.codes)
			}
			if o.Responses.Default != nil {
				t.Errorf("%s: has a default response", o.OperationId)
			}
			for code, r := range o.Responses.Codes.FromOldest() {
				checkResponse(t, o.OperationId, code, r)
			}
		}
	}
	if len(seen) != len(want) || len(pathsSeen) != len(want) {
		t.Errorf("paths %v, operations %v; want exactly the four operations and the receipt keys", pathsSeen, slices.Sorted(maps.Keys(seen)))
	}
}

func hasKey[V any](m *orderedmap.Map[string, V], k string) bool {
	_, ok := m.Get(k)
	return ok
}

func checkResponse(t *testing.T, opID, code string, r *v3.Response) {
	t.Helper()
	required := func(name string) bool {
		h := r.Headers.GetOrZero(name)
		return h != nil && h.Required
	}
	if !required("Cache-Control") {
		t.Errorf("%s %s: no required Cache-Control header", opID, code)
	}
	if (code == "401") != required("WWW-Authenticate") {
		t.Errorf("%s %s: required WWW-Authenticate = %v", opID, code, required("WWW-Authenticate"))
	}
	if (code == "503") != required("Retry-After") {
		t.Errorf("%s %s: required Retry-After = %v", opID, code, required("Retry-After"))
	}
	if r.Content.Len() != 1 || r.Content.GetOrZero("application/json") == nil {
		t.Errorf("%s %s: content is not only application/json", opID, code)
		return
	}
	if code[0] == '4' || code[0] == '5' {
		ref := r.Content.GetOrZero("application/json").Schema.GetReference()
		if ref != "#/components/schemas/ErrorEnvelope" {
			t.Errorf("%s %s: schema %q, want the ErrorEnvelope", opID, code, ref)
		}
	}
}

// ---- helpers ---------------------------------------------------------------

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func metricsRequest(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, base+"/api/svc/v1/metrics", bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+sessionToken)
	r.Header.Set("Idempotency-Key", idemKey)
	r.Header.Set("Content-Type", "application/json")
	return r
}

func keyRequest(method, path string) *http.Request {
	r := httptest.NewRequest(method, base+path, nil)
	r.Header.Set("Authorization", "Bearer "+apiKey)
	if method == http.MethodPost {
		r.Header.Set("Idempotency-Key", idemKey)
	}
	return r
}

// response is what a handler would answer: JSON body, no-store, and the
// extra headers given as name, value pairs.
// metricsResponse is a 200 to POST /metrics, with the fields that name the
// client and the session.
func metricsResponse(body any, headers ...string) *http.Response {
	return response(http.StatusOK, body, append([]string{"Evalmeter-Client", "acme", "Evalmeter-Session", "sess_0123456789abcdef01234567"}, headers...)...)
}

func response(status int, body any, headers ...string) *http.Response {
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			panic(err)
		}
	}
	w := httptest.NewRecorder()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			w.Header().Del(headers[i])
		} else {
			w.Header().Set(headers[i], headers[i+1])
		}
	}
	w.WriteHeader(status)
	w.Write(raw)
	return w.Result()
}

func exampleRequest(t *testing.T) []byte {
	return readFile(t, "../../api/examples/metrics-request.json")
}

// metricsEnvelope is the 200 answer to body, as a generic JSON object so
// that cases can break it.
func metricsEnvelope(t *testing.T, body []byte) map[string]any {
	t.Helper()
	m, err := metrics.Compute(body)
	if err != nil {
		t.Fatalf("metrics.Compute: %v", err)
	}
	raw, err := json.Marshal(map[string]any{"metrics": m, "idempotent_replay": false})
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	return env
}

func sessionEnvelope() map[string]any {
	return map[string]any{
		"session": map[string]any{
			"id":                    "sess_0123456789abcdef01234567",
			"token":                 sessionToken,
			"issued_at":             "2026-11-21T09:00:00Z",
			"expires_at":            "2026-11-21T10:00:00Z",
			"access_window_minutes": 60,
			"hours_consumed":        1,
		},
		"idempotent_replay": false,
	}
}

func usageEnvelope() map[string]any {
	return map[string]any{"usage": map[string]any{
		"client_id":       "acme-gmbh",
		"allocated_hours": 10,
		"consumed_hours":  3,
		"remaining_hours": 7,
		"active_sessions": 1,
		"metering":        "One evaluation-hour credit per session: a consecutive 60-minute window from creation; idle time counts; it cannot be paused.",
	}}
}

func schemaDocument(t *testing.T) map[string]any {
	var schema map[string]any
	if err := json.Unmarshal(api.MetricsRequestSchema, &schema); err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"schema_version":     "1.0",
		"service":            "evalmeter",
		"purpose":            "Deterministic aggregate metrics from customer-reported observations.",
		"accepted_content":   "Structured observations only.",
		"prohibited_content": []string{"prompts", "model responses", "credentials"},
		"limits":             map[string]any{"body_bytes": 262144, "cases_per_request": 500, "access_window_minutes": 60},
		"operations": map[string]any{
			"schema":   "GET /api/svc/v1/schema",
			"sessions": "POST /api/svc/v1/sessions",
			"metrics":  "POST /api/svc/v1/metrics",
			"usage":    "GET /api/svc/v1/usage",
		},
		"metrics_request": schema,
		"output":          map[string]any{"report_included": false, "full_report": "A full report is a separate human-reviewed service."},
	}
}

func errorEnvelope(code string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "message": "m"}}
}

// set returns a copy of doc (decoded JSON) with the value at the dotted path
// replaced, or deleted when value is del.
func set(doc map[string]any, path string, value any) map[string]any {
	raw, _ := json.Marshal(doc)
	var c map[string]any
	json.Unmarshal(raw, &c)
	keys := strings.Split(path, ".")
	m := c
	for _, k := range keys[:len(keys)-1] {
		m = m[k].(map[string]any)
	}
	if value == del {
		delete(m, keys[len(keys)-1])
	} else {
		m[keys[len(keys)-1]] = value
	}
	return c
}

var del = &struct{}{}

// ---- valid pairs -----------------------------------------------------------

func TestValidPairs(t *testing.T) {
	v := newValidator(t)
	example := exampleRequest(t)

	tests := []struct {
		name string
		req  func() *http.Request
		resp func() *http.Response
	}{
		{
			name: "postMetrics 200",
			req:  func() *http.Request { return metricsRequest(example) },
			resp: func() *http.Response { return metricsResponse(metricsEnvelope(t, example)) },
		},
		{
			name: "postMetrics 200 replay, quoted key, charset",
			req: func() *http.Request {
				r := metricsRequest(example)
				r.Header.Set("Idempotency-Key", `"`+idemKey+`"`)
				r.Header.Set("Content-Type", "application/json; charset=utf-8")
				return r
			},
			resp: func() *http.Response {
				return metricsResponse(set(metricsEnvelope(t, example), "idempotent_replay", true))
			},
		},
		{
			name: "postMetrics 422",
			req:  func() *http.Request { return metricsRequest(example) },
			resp: func() *http.Response {
				return response(422, map[string]any{"error": map[string]any{"code": "invalid_field", "message": "m", "field": "cases[0].latency_ms"}})
			},
		},
		{
			name: "openSession 201",
			req:  func() *http.Request { return keyRequest(http.MethodPost, "/api/svc/v1/sessions") },
			resp: func() *http.Response { return response(201, sessionEnvelope()) },
		},
		{
			name: "getUsage 200",
			req:  func() *http.Request { return keyRequest(http.MethodGet, "/api/svc/v1/usage") },
			resp: func() *http.Response { return response(200, usageEnvelope()) },
		},
		{
			name: "getSchema 200",
			req:  func() *http.Request { return keyRequest(http.MethodGet, "/api/svc/v1/schema") },
			resp: func() *http.Response { return response(200, schemaDocument(t)) },
		},
		{
			name: "getUsage 401",
			req:  func() *http.Request { return keyRequest(http.MethodGet, "/api/svc/v1/usage") },
			resp: func() *http.Response {
				return response(401, errorEnvelope("unauthorized"), "WWW-Authenticate", `Bearer realm="evalmeter", error="invalid_token"`)
			},
		},
		{
			name: "openSession 503",
			req:  func() *http.Request { return keyRequest(http.MethodPost, "/api/svc/v1/sessions") },
			resp: func() *http.Response {
				return response(503, errorEnvelope("service_unavailable"), "Retry-After", "5")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req()
			reqBody, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(reqBody))
			if err := v.Request(req); err != nil {
				t.Errorf("Request: %v", err)
			}
			if got, _ := io.ReadAll(req.Body); !bytes.Equal(got, reqBody) {
				t.Errorf("request body after Request: %d bytes, want the %d sent", len(got), len(reqBody))
			}

			resp := tc.resp()
			respBody, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(bytes.NewReader(respBody))
			if err := v.Response(req, resp); err != nil {
				t.Errorf("Response: %v", err)
			}
			if got, _ := io.ReadAll(resp.Body); !bytes.Equal(got, respBody) {
				t.Errorf("response body after Response: %d bytes, want the %d received", len(got), len(respBody))
			}
		})
	}
}

// TestLiveServer checks path matching and body restoring for requests and
// responses that crossed a real connection.
func TestLiveServer(t *testing.T) {
	v := newValidator(t)
	example := exampleRequest(t)
	env, err := json.Marshal(metricsEnvelope(t, example))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := v.Request(r); err != nil {
			t.Errorf("server side Request: %v", err)
		}
		if got, _ := io.ReadAll(r.Body); !bytes.Equal(got, example) {
			t.Errorf("handler read %d bytes after Request, want %d", len(got), len(example))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Evalmeter-Client", "acme")
		w.Header().Set("Evalmeter-Session", "sess_0123456789abcdef01234567")
		w.Write(env)
	}))
	defer srv.Close()

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/svc/v1/metrics", bytes.NewReader(example))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sessionToken)
	req.Header.Set("Idempotency-Key", idemKey)
	req.Header.Set("Content-Type", "application/json")
	if err := v.Request(req); err != nil {
		t.Fatalf("client side Request: %v", err)
	}
	resp, err := srv.Client().Do(req) // sends the restored body
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := v.Response(req, resp); err != nil {
		t.Errorf("Response: %v", err)
	}
	if got, _ := io.ReadAll(resp.Body); !bytes.Equal(got, env) {
		t.Errorf("response body after Response: %d bytes, want %d", len(got), len(env))
	}
}

// ---- invalid ones ----------------------------------------------------------

func TestViolationsAreCaught(t *testing.T) {
	v := newValidator(t)
	example := exampleRequest(t)
	var exampleDoc map[string]any
	if err := json.Unmarshal(example, &exampleDoc); err != nil {
		t.Fatal(err)
	}
	body := func(doc map[string]any) []byte {
		b, _ := json.Marshal(doc)
		return b
	}
	usage := func() *http.Request { return keyRequest(http.MethodGet, "/api/svc/v1/usage") }
	sessions := func() *http.Request { return keyRequest(http.MethodPost, "/api/svc/v1/sessions") }
	postMetrics := func() *http.Request { return metricsRequest(example) }

	tests := []struct {
		name string
		req  func() *http.Request
		resp func() *http.Response // nil: the request itself is invalid
		want []string              // each must appear in the error
	}{
		// requests
		{
			name: "request body with an unknown field",
			req:  func() *http.Request { return metricsRequest(body(set(exampleDoc, "prompt", "hi"))) },
			want: []string{"additional properties 'prompt' not allowed"},
		},
		{
			name: "request missing Idempotency-Key",
			req: func() *http.Request {
				r := metricsRequest(example)
				r.Header.Del("Idempotency-Key")
				return r
			},
			want: []string{"Idempotency-Key", "missing"},
		},
		{
			name: "sessions request missing Idempotency-Key",
			req: func() *http.Request {
				r := sessions()
				r.Header.Del("Idempotency-Key")
				return r
			},
			want: []string{"Idempotency-Key", "missing"},
		},
		{
			name: "Idempotency-Key too short",
			req: func() *http.Request {
				r := metricsRequest(example)
				r.Header.Set("Idempotency-Key", "short")
				return r
			},
			want: []string{"Idempotency-Key", "does not match pattern"},
		},
		{
			name: "Idempotency-Key half quoted",
			req: func() *http.Request {
				r := metricsRequest(example)
				r.Header.Set("Idempotency-Key", `"`+idemKey)
				return r
			},
			want: []string{"Idempotency-Key", "does not match pattern"},
		},
		{
			name: "no bearer credential",
			req: func() *http.Request {
				r := usage()
				r.Header.Del("Authorization")
				return r
			},
			want: []string{"Authorization header was not found"},
		},
		{
			name: "metrics body not application/json",
			req: func() *http.Request {
				r := postMetrics()
				r.Header.Set("Content-Type", "text/plain")
				return r
			},
			want: []string{"text/plain"},
		},
		{
			name: "metrics without a body",
			req: func() *http.Request {
				r := metricsRequest(nil)
				return r
			},
			want: []string{"request body is empty"},
		},
		{
			name: "query string",
			req: func() *http.Request {
				r := keyRequest(http.MethodGet, "/api/svc/v1/usage?client=acme")
				return r
			},
			want: []string{`query string "client=acme"`, "unexpected_query"},
		},
		{
			name: "body on POST sessions",
			req: func() *http.Request {
				r := httptest.NewRequest(http.MethodPost, base+"/api/svc/v1/sessions", strings.NewReader(`{}`))
				r.Header.Set("Authorization", "Bearer "+apiKey)
				r.Header.Set("Idempotency-Key", idemKey)
				return r
			},
			want: []string{"body of 2 bytes", "unexpected_body"},
		},
		{
			name: "Idempotency-Key twice",
			req: func() *http.Request {
				r := metricsRequest(example)
				r.Header.Add("Idempotency-Key", idemKey+"-2")
				return r
			},
			want: []string{"header Idempotency-Key sent 2 times"},
		},
		{
			name: "body above 262144 bytes",
			req: func() *http.Request {
				doc := set(exampleDoc, "run_id", "r")
				cases := doc["cases"].([]any)
				c := cases[0].(map[string]any)
				c["repeat_group"] = strings.Repeat("g", 128)
				for i := len(cases); i < 500; i++ { // still 500 cases: only the size is wrong
					c["case_id"] = fmt.Sprintf("case-%03d-%s", i, strings.Repeat("x", 119))
					cases = append(cases, maps.Clone(c))
				}
				doc["cases"] = cases
				b, _ := json.MarshalIndent(doc, "", "    ") // whitespace counts too
				if len(b) <= metrics.MaxBodyBytes {
					panic(fmt.Sprintf("body of %d bytes is not too large", len(b)))
				}
				return metricsRequest(b)
			},
			want: []string{"above the limit of 262144 bytes"},
		},
		{
			name: "unknown path",
			req:  func() *http.Request { return keyRequest(http.MethodGet, "/api/svc/v1/sessions/x") },
			want: []string{"not found"},
		},
		{
			name: "method not in the document",
			req:  func() *http.Request { return keyRequest(http.MethodDelete, "/api/svc/v1/usage") },
			want: []string{"DELETE"},
		},
		{
			name: "latency out of range, status not in enum and cost without currency, all listed",
			req: func() *http.Request {
				doc := set(exampleDoc, "cost_currency", del)
				cases := doc["cases"].([]any)
				cases[0].(map[string]any)["latency_ms"] = 86400001
				cases[2].(map[string]any)["status"] = "passed"
				return metricsRequest(body(doc))
			},
			want: []string{"$.cases[0].latency_ms", "$.cases[2].status", "cost_currency"},
		},

		// responses
		{
			name: "401 without WWW-Authenticate",
			req:  usage,
			resp: func() *http.Response { return response(401, errorEnvelope("unauthorized")) },
			want: []string{"Required header 'WWW-Authenticate'"},
		},
		{
			name: "401 with another challenge",
			req:  usage,
			resp: func() *http.Response {
				return response(401, errorEnvelope("unauthorized"), "WWW-Authenticate", `Basic realm="x"`)
			},
			want: []string{"www-authenticate", "does not match pattern"},
		},
		{
			name: "error envelope with an unknown code",
			req:  usage,
			resp: func() *http.Response { return response(403, errorEnvelope("agreement_lapsed")) },
			want: []string{"$.error.code", "agreement_lapsed"},
		},
		{
			name: "error envelope with an extra member",
			req:  usage,
			resp: func() *http.Response {
				return response(403, set(errorEnvelope("agreement_expired"), "error.stack", "trace"))
			},
			want: []string{"$.error", "'stack' not allowed"},
		},
		{
			name: "session id not matching the pattern",
			req:  sessions,
			resp: func() *http.Response {
				return response(201, set(sessionEnvelope(), "session.id", "sess_0123456789ABCDEF01234567"))
			},
			want: []string{"$.session.id", "does not match pattern"},
		},
		{
			name: "session expires_at not a date-time",
			req:  sessions,
			resp: func() *http.Response {
				return response(201, set(sessionEnvelope(), "session.expires_at", "in an hour"))
			},
			want: []string{"$.session.expires_at", "date-time"},
		},
		{
			name: "session hours_consumed 2",
			req:  sessions,
			resp: func() *http.Response { return response(201, set(sessionEnvelope(), "session.hours_consumed", 2)) },
			want: []string{"$.session.hours_consumed"},
		},
		{
			name: "metrics without Evalmeter-Client",
			req:  postMetrics,
			resp: func() *http.Response { return metricsResponse(metricsEnvelope(t, example), "Evalmeter-Client", "") },
			want: []string{"Evalmeter-Client"},
		},
		{
			name: "metrics envelope missing a required field",
			req:  postMetrics,
			resp: func() *http.Response {
				return metricsResponse(set(metricsEnvelope(t, example), "metrics.integrity", del))
			},
			want: []string{"$.metrics", "missing property 'integrity'"},
		},
		{
			name: "metrics envelope missing idempotent_replay",
			req:  postMetrics,
			resp: func() *http.Response {
				return metricsResponse(set(metricsEnvelope(t, example), "idempotent_replay", del))
			},
			want: []string{"missing property 'idempotent_replay'"},
		},
		{
			name: "report_included true",
			req:  postMetrics,
			resp: func() *http.Response {
				return metricsResponse(set(metricsEnvelope(t, example), "metrics.report_included", true))
			},
			want: []string{"$.metrics.report_included"},
		},
		{
			name: "nullable rate above 1",
			req:  postMetrics,
			resp: func() *http.Response {
				return metricsResponse(set(metricsEnvelope(t, example), "metrics.tool_checks.pass_rate", 1.5))
			},
			want: []string{"$.metrics.tool_checks.pass_rate", "maximum"},
		},
		{
			name: "non-nullable rate null",
			req:  postMetrics,
			resp: func() *http.Response {
				return metricsResponse(set(metricsEnvelope(t, example), "metrics.status.pass_rate", nil))
			},
			want: []string{"$.metrics.status.pass_rate", "got null"},
		},
		{
			name: "currency not in the enum",
			req:  postMetrics,
			resp: func() *http.Response {
				return metricsResponse(set(metricsEnvelope(t, example), "metrics.cost_reported.currency", "JPY"))
			},
			want: []string{"$.metrics.cost_reported.currency"},
		},
		{
			name: "digest in upper case",
			req:  postMetrics,
			resp: func() *http.Response {
				env := metricsEnvelope(t, example)
				d := env["metrics"].(map[string]any)["integrity"].(map[string]any)["canonical_sha256"].(string)
				return metricsResponse(set(env, "metrics.integrity.canonical_sha256", strings.ToUpper(d)))
			},
			want: []string{"$.metrics.integrity.canonical_sha256", "does not match pattern"},
		},
		{
			name: "case_count 0",
			req:  postMetrics,
			resp: func() *http.Response {
				return metricsResponse(set(metricsEnvelope(t, example), "metrics.case_count", 0))
			},
			want: []string{"$.metrics.case_count", "minimum"},
		},
		{
			name: "503 without Retry-After",
			req:  usage,
			resp: func() *http.Response { return response(503, errorEnvelope("service_unavailable")) },
			want: []string{"Required header 'Retry-After'"},
		},
		{
			name: "without Cache-Control",
			req:  usage,
			resp: func() *http.Response { return response(200, usageEnvelope(), "Cache-Control", "") },
			want: []string{"Required header 'Cache-Control'"},
		},
		{
			name: "Cache-Control not no-store",
			req:  usage,
			resp: func() *http.Response { return response(200, usageEnvelope(), "Cache-Control", "max-age=60") },
			want: []string{"cache-control"},
		},
		{
			name: "status the operation does not declare",
			req:  usage,
			resp: func() *http.Response { return response(402, errorEnvelope("credits_exhausted")) },
			want: []string{"402"},
		},
		{
			name: "response not JSON",
			req:  usage,
			resp: func() *http.Response {
				return response(200, "<html></html>", "Content-Type", "text/html")
			},
			want: []string{"text/html"},
		},
		{
			name: "empty error body",
			req:  usage,
			resp: func() *http.Response { return response(403, "") },
			want: []string{"missing"},
		},
		{
			name: "usage negative",
			req:  usage,
			resp: func() *http.Response { return response(200, set(usageEnvelope(), "usage.remaining_hours", -1)) },
			want: []string{"$.usage.remaining_hours", "minimum"},
		},
		{
			name: "schema document with a fifth operation",
			req:  func() *http.Request { return keyRequest(http.MethodGet, "/api/svc/v1/schema") },
			resp: func() *http.Response {
				return response(200, set(schemaDocument(t), "operations.report", "GET /api/svc/v1/report"))
			},
			want: []string{"$.operations", "'report' not allowed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req()
			var err error
			if tc.resp == nil {
				err = v.Request(req)
			} else {
				if rerr := v.Request(req); rerr != nil {
					t.Fatalf("the request of this case is itself invalid: %v", rerr)
				}
				err = v.Response(req, tc.resp())
			}
			if err == nil {
				t.Fatal("no violation reported")
			}
			var cerr *openapitest.Error
			if !errors.As(err, &cerr) || len(cerr.Violations) == 0 {
				t.Fatalf("error %T without violations: %v", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if t.Failed() || testing.Verbose() {
				t.Log(err)
			}
		})
	}
}

// ---- the MetricsRequest component and the JSON Schema file -----------------

// notInJSONSchema are the 422 vectors that break only a rule JSON Schema
// cannot state (see the description of api/metrics-request.schema.json):
// both schemas accept them and the service refuses them.
var notInJSONSchema = map[string]string{
	"duplicate-case-id":    "case_id unique within a request",
	"trace-observed-above": "observed_steps must not exceed expected_steps",
}

func TestMetricsRequestMatchesJSONSchema(t *testing.T) {
	v := newValidator(t)

	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.MetricsRequestSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("metrics-request.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("metrics-request.schema.json")
	if err != nil {
		t.Fatal(err)
	}

	ran := map[int]int{}
	exceptions := map[string]bool{}
	for _, vec := range metricsVectors(t) {
		if vec.Expect.Status == http.StatusBadRequest {
			continue // not JSON: neither schema applies
		}
		t.Run(vec.Name, func(t *testing.T) {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(vec.Body))
			if err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			schemaErr := schema.Validate(inst)
			contractErr := v.Request(metricsRequest([]byte(vec.Body)))
			schemaOK, contractOK := schemaErr == nil, contractErr == nil
			if schemaOK != contractOK {
				t.Fatalf("they disagree:\nJSON Schema file: %v\nMetricsRequest component: %v", schemaErr, contractErr)
			}
			switch want := vec.Expect.Status; {
			case want == http.StatusOK && !contractOK:
				t.Fatalf("a 200 body is invalid under both:\n%v", contractErr)
			case want == http.StatusUnprocessableEntity && contractOK:
				if notInJSONSchema[vec.Name] == "" {
					t.Fatal("a 422 body is valid under both")
				}
				exceptions[vec.Name] = true
			case want != http.StatusOK && want != http.StatusUnprocessableEntity:
				t.Fatalf("unexpected status %d in the vectors", want)
			}
			ran[vec.Expect.Status]++
		})
	}
	if ran[200] < 50 || ran[422] < 30 {
		t.Errorf("only %d valid and %d invalid vectors compared", ran[200], ran[422])
	}
	for name, rule := range notInJSONSchema {
		if !exceptions[name] {
			t.Errorf("vector %q (%s) is no longer accepted by both schemas: update notInJSONSchema", name, rule)
		}
	}
}

// TestVectorMetricsAreValidResponses checks the expected metrics of every
// 200 vector, null rates and currencies included, as a 200 response.
func TestVectorMetricsAreValidResponses(t *testing.T) {
	v := newValidator(t)
	n := 0
	for _, vec := range metricsVectors(t) {
		if vec.Expect.Status != http.StatusOK {
			continue
		}
		n++
		env := `{"metrics":` + string(vec.Expect.Metrics) + `,"idempotent_replay":true}`
		req := metricsRequest([]byte(vec.Body))
		if err := v.Response(req, metricsResponse(env)); err != nil {
			t.Errorf("%s: %v", vec.Name, err)
		}
	}
	if n < 50 {
		t.Errorf("only %d vectors checked", n)
	}
}

// A metricsVector is one case of the metrics engine's test vectors,
// internal/metrics/testdata/metrics-vectors.json: a request body and the
// status and metrics the service answers it with.
type metricsVector struct {
	Name   string `json:"name"`
	Body   string `json:"body"`
	Expect struct {
		Status  int             `json:"status"`
		Metrics json.RawMessage `json:"metrics"`
	} `json:"expect"`
}

// metricsVectors reads the metrics engine's test vectors.
func metricsVectors(t *testing.T) []metricsVector {
	t.Helper()
	var file struct {
		Vectors []metricsVector `json:"vectors"`
	}
	if err := json.Unmarshal(readFile(t, "../metrics/testdata/metrics-vectors.json"), &file); err != nil {
		t.Fatal(err)
	}
	return file.Vectors
}

// TestConcurrentUse runs requests and responses through one Validator from
// many goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	v := newValidator(t)
	example := exampleRequest(t)
	env := metricsEnvelope(t, example)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for range 10 {
				req := metricsRequest(example)
				if err := v.Request(req); err != nil {
					t.Errorf("goroutine %d: Request: %v", i, err)
					return
				}
				if err := v.Response(req, metricsResponse(env)); err != nil {
					t.Errorf("goroutine %d: Response: %v", i, err)
					return
				}
				if err := v.Request(keyRequest(http.MethodGet, "/api/svc/v1/usage?x=1")); err == nil {
					t.Errorf("goroutine %d: query string not reported", i)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestErrorCodes checks that error.code takes exactly the codes of docs/design.md#6-error-codes-and-statuses
// §4, each accepted in an error envelope.
func TestErrorCodes(t *testing.T) {
	v := newValidator(t)
	codes := []string{
		"malformed_json", "unexpected_body", "unexpected_query", "missing_idempotency_key",
		"invalid_idempotency_key", "unauthorized", "credits_exhausted", "agreement_expired",
		"idempotency_key_reused", "payload_too_large", "unsupported_media_type", "unknown_field",
		"missing_field", "invalid_field", "not_found", "method_not_allowed", "service_unavailable",
		"internal_error",
	}
	doc, err := libopenapi.NewDocument(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	code := m.Model.Components.Schemas.GetOrZero("ErrorEnvelope").Schema().
		Properties.GetOrZero("error").Schema().
		Properties.GetOrZero("code").Schema()
	var enum []string
	for _, n := range code.Enum {
		enum = append(enum, n.Value)
	}
	if !slices.Equal(slices.Sorted(slices.Values(enum)), slices.Sorted(slices.Values(codes))) {
		t.Errorf("error.code enum = %v, want %v", enum, codes)
	}
	for _, c := range codes {
		req := keyRequest(http.MethodGet, "/api/svc/v1/usage")
		if err := v.Response(req, response(http.StatusBadRequest, errorEnvelope(c))); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
}
