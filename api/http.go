package api

import (
	"encoding/json"
	"net/http"
	"time"
)

// Prefix is the path of version 1 of the API under the service's base URL.
const Prefix = "/api/svc/v1"

// The paths of the API's operations, and of the receipt keys' document.
const (
	PathSchema      = Prefix + "/schema"   // GET: the schema document
	PathSessions    = Prefix + "/sessions" // POST: open a session (one credit)
	PathMetrics     = Prefix + "/metrics"  // POST: compute a metrics request
	PathUsage       = Prefix + "/usage"    // GET: the client's credits
	PathReceiptKeys = "/.well-known/evalmeter/receipt-keys.json"
)

// Headers of the API beyond HTTP's own.
const (
	// HeaderIdempotencyKey makes a POST happen once: a retry with the same
	// key replays the first answer.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderRequestID names a request in the service's logs; a caller's
	// short, plain value is kept.
	HeaderRequestID = "X-Request-Id"
	// HeaderLowCredit is set on a usage answer when the client's remaining
	// hours are at or below the low-credit threshold its operator set, as
	// an RFC 8941 dictionary: "remaining=1, threshold=2". The usage body is
	// closed (docs/design.md#35-usage), so the warning travels in a header.
	HeaderLowCredit = "Evalmeter-Low-Credit"
	// HeaderClient and HeaderSession name, on a signed metrics answer, the
	// client and the session the receipt's signature covers.
	HeaderClient  = "Evalmeter-Client"
	HeaderSession = "Evalmeter-Session"
)

// Values of error.code. Each goes with one HTTP status; Error.Status maps them.
const (
	CodeMalformedJSON         = "malformed_json"          // 400
	CodeUnexpectedBody        = "unexpected_body"         // 400
	CodeUnexpectedQuery       = "unexpected_query"        // 400
	CodeMissingIdempotencyKey = "missing_idempotency_key" // 400
	CodeInvalidIdempotencyKey = "invalid_idempotency_key" // 400
	CodeUnauthorized          = "unauthorized"            // 401
	CodeCreditsExhausted      = "credits_exhausted"       // 402
	CodeAgreementExpired      = "agreement_expired"       // 403
	CodeNotFound              = "not_found"               // 404
	CodeMethodNotAllowed      = "method_not_allowed"      // 405
	CodeIdempotencyKeyReused  = "idempotency_key_reused"  // 409
	CodePayloadTooLarge       = "payload_too_large"       // 413
	CodeUnsupportedMediaType  = "unsupported_media_type"  // 415
	CodeUnknownField          = "unknown_field"           // 422
	CodeMissingField          = "missing_field"           // 422
	CodeInvalidField          = "invalid_field"           // 422
	CodeInternalError         = "internal_error"          // 500
	CodeServiceUnavailable    = "service_unavailable"     // 503
)

// Error is why a request was refused: the inner object of ErrorEnvelope.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field is the path of the first offending place of a metrics request,
	// such as "cases[3].latency_ms"; empty when the whole body is at fault.
	Field string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Status is the HTTP status that goes with e.Code; 500 for a code this
// package does not define.
func (e *Error) Status() int {
	if s, ok := statuses[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

var statuses = map[string]int{
	CodeMalformedJSON:         http.StatusBadRequest,
	CodeUnexpectedBody:        http.StatusBadRequest,
	CodeUnexpectedQuery:       http.StatusBadRequest,
	CodeMissingIdempotencyKey: http.StatusBadRequest,
	CodeInvalidIdempotencyKey: http.StatusBadRequest,
	CodeUnauthorized:          http.StatusUnauthorized,
	CodeCreditsExhausted:      http.StatusPaymentRequired,
	CodeAgreementExpired:      http.StatusForbidden,
	CodeNotFound:              http.StatusNotFound,
	CodeMethodNotAllowed:      http.StatusMethodNotAllowed,
	CodeIdempotencyKeyReused:  http.StatusConflict,
	CodePayloadTooLarge:       http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType:  http.StatusUnsupportedMediaType,
	CodeUnknownField:          http.StatusUnprocessableEntity,
	CodeMissingField:          http.StatusUnprocessableEntity,
	CodeInvalidField:          http.StatusUnprocessableEntity,
	CodeInternalError:         http.StatusInternalServerError,
	CodeServiceUnavailable:    http.StatusServiceUnavailable,
}

// ErrorEnvelope is the body of every refusal.
type ErrorEnvelope struct {
	Error Error `json:"error"`
}

// Session is an open session: a token for POST /metrics, valid for one
// access window.
type Session struct {
	ID                  string    `json:"id"`
	Token               string    `json:"token"`
	IssuedAt            time.Time `json:"issued_at"`
	ExpiresAt           time.Time `json:"expires_at"`
	AccessWindowMinutes int       `json:"access_window_minutes"`
	HoursConsumed       int       `json:"hours_consumed"`
}

// SessionEnvelope is the body of a 201 of POST /sessions.
type SessionEnvelope struct {
	Session Session `json:"session"`
	// IdempotentReplay is true when the answer replays an earlier opening
	// with the same Idempotency-Key: no credit was spent.
	IdempotentReplay bool `json:"idempotent_replay"`
}

// Usage is the client's credit figures.
type Usage struct {
	ClientID       string `json:"client_id"`
	AllocatedHours int    `json:"allocated_hours"`
	ConsumedHours  int    `json:"consumed_hours"`
	RemainingHours int    `json:"remaining_hours"`
	ActiveSessions int    `json:"active_sessions"`
	Metering       string `json:"metering"`
}

// UsageEnvelope is the body of a 200 of GET /usage.
type UsageEnvelope struct {
	Usage Usage `json:"usage"`
}

// MetricsEnvelope is the body of a 200 of POST /metrics.
type MetricsEnvelope struct {
	Metrics Metrics `json:"metrics"`
	// IdempotentReplay is true when the service replayed the stored result
	// of an earlier request with the same Idempotency-Key and body.
	IdempotentReplay bool `json:"idempotent_replay"`
}

// SchemaDocument is the body of a 200 of GET /schema.
type SchemaDocument struct {
	SchemaVersion     string   `json:"schema_version"`
	Service           string   `json:"service"`
	Purpose           string   `json:"purpose"`
	AcceptedContent   string   `json:"accepted_content"`
	ProhibitedContent []string `json:"prohibited_content"`
	Limits            Limits   `json:"limits"`
	Operations        struct {
		Schema   string `json:"schema"`
		Sessions string `json:"sessions"`
		Metrics  string `json:"metrics"`
		Usage    string `json:"usage"`
	} `json:"operations"`
	// MetricsRequest is MetricsRequestSchema.
	MetricsRequest json.RawMessage `json:"metrics_request"`
	Output         struct {
		ReportIncluded bool   `json:"report_included"`
		FullReport     string `json:"full_report"`
	} `json:"output"`
}

// Limits are the bounds of the API that the schema document publishes.
type Limits struct {
	BodyBytes           int `json:"body_bytes"`
	CasesPerRequest     int `json:"cases_per_request"`
	AccessWindowMinutes int `json:"access_window_minutes"`
}
