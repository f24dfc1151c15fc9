package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/evalmeter/evalmeter/api"
)

// retryAfterSeconds is what a 503 tells clients to wait.
const retryAfterSeconds = 2

// apiError is a refusal: the error envelope's content, with the headers
// its status calls for. Its status is the code's (api.Error.Status).
type apiError struct {
	body   api.Error
	header http.Header
}

func (e *apiError) Error() string { return e.body.Message }

func (e *apiError) status() int { return e.body.Status() }

func newError(code, message string) *apiError {
	return &apiError{body: api.Error{Code: code, Message: message}}
}

// engineError turns a refusal of the metrics engine (400 or 422).
func engineError(e *api.Error) *apiError {
	return &apiError{body: *e}
}

// unauthorized is a 401 with its RFC 6750 challenge; invalid says a
// credential was sent but is not valid (or has expired).
func unauthorized(message string, invalid bool) *apiError {
	e := newError(api.CodeUnauthorized, message)
	challenge := `Bearer realm="evalmeter"`
	if invalid {
		challenge += `, error="invalid_token"`
	}
	e.header = http.Header{"Www-Authenticate": {challenge}}
	return e
}

func unavailable(message string) *apiError {
	e := newError(api.CodeServiceUnavailable, message)
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
	body, err := marshal(api.ErrorEnvelope{Error: e.body})
	if err != nil { // cannot happen: strings only
		body = []byte(`{"error":{"code":"internal_error","message":"could not encode the error"}}`)
	}
	writeJSON(w, e.status(), body)
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
	return newError(api.CodeInternalError,
		"internal error; it has been logged with request id "+requestID+": quote it when reporting the problem")
}
