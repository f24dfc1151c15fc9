package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// Values of error.code (DESIGN.md §4) that the HTTP layer adds to the
// engine's (metrics.Code*).
const (
	codeUnexpectedBody        = "unexpected_body"
	codeUnexpectedQuery       = "unexpected_query"
	codeMissingIdempotencyKey = "missing_idempotency_key"
	codeInvalidIdempotencyKey = "invalid_idempotency_key"
	codeUnauthorized          = "unauthorized"
	codeCreditsExhausted      = "credits_exhausted"
	codeAgreementExpired      = "agreement_expired"
	codeIdempotencyKeyReused  = "idempotency_key_reused"
	codePayloadTooLarge       = "payload_too_large"
	codeUnsupportedMediaType  = "unsupported_media_type"
	codeNotFound              = "not_found"
	codeMethodNotAllowed      = "method_not_allowed"
	codeServiceUnavailable    = "service_unavailable"
	codeInternalError         = "internal_error"
)

// retryAfterSeconds is what a 503 tells clients to wait.
const retryAfterSeconds = 2

// apiError is a refusal: an HTTP status and the error envelope's content,
// with the headers that status calls for.
type apiError struct {
	status int
	body   metrics.Error
	header http.Header
}

func (e *apiError) Error() string { return e.body.Message }

func newError(status int, code, message string) *apiError {
	return &apiError{status: status, body: metrics.Error{Code: code, Message: message}}
}

// engineError turns a refusal of the metrics engine (400 or 422).
func engineError(e *metrics.Error) *apiError {
	return &apiError{status: e.HTTPStatus(), body: *e}
}

// unauthorized is a 401 with its RFC 6750 challenge; invalid says a
// credential was sent but is not valid (or has expired).
func unauthorized(message string, invalid bool) *apiError {
	e := newError(http.StatusUnauthorized, codeUnauthorized, message)
	challenge := `Bearer realm="evalmeter"`
	if invalid {
		challenge += `, error="invalid_token"`
	}
	e.header = http.Header{"Www-Authenticate": {challenge}}
	return e
}

func unavailable(message string) *apiError {
	e := newError(http.StatusServiceUnavailable, codeServiceUnavailable, message)
	e.header = http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}}
	return e
}

// writeJSON writes a JSON response with the headers every response has.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff") // never rendered as anything but JSON
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func writeError(w http.ResponseWriter, e *apiError) {
	for k, v := range e.header {
		w.Header()[k] = v
	}
	body, err := marshal(struct {
		Error metrics.Error `json:"error"`
	}{e.body})
	if err != nil { // cannot happen: strings only
		body = []byte(`{"error":{"code":"internal_error","message":"could not encode the error"}}`)
	}
	writeJSON(w, e.status, body)
}

// marshal is json.Marshal without HTML escaping: messages keep their '<'.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// internalError is the 500 of a bug. The request id lets the client's
// report be matched with the log line that holds the cause.
func internalError(requestID string) *apiError {
	return newError(http.StatusInternalServerError, codeInternalError,
		"internal error; it has been logged with request id "+requestID+": quote it when reporting the problem")
}
