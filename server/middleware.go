package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
)

// handlerFunc is a handler that returns its refusal instead of writing it,
// so that every error becomes the error envelope in one place.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// requestInfo is what a request's log line and metrics need to know from
// its handler. It never holds a credential or a body.
type requestInfo struct {
	id        string
	route     string
	clientID  string
	sessionID string
}

type requestInfoKey struct{}

// requestInfoFrom returns the request's info; a request that did not pass
// through the middleware (a unit test calling a handler) gets a blank one.
func requestInfoFrom(r *http.Request) *requestInfo {
	if info, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok {
		return info
	}
	return &requestInfo{}
}

// endpoint adapts h: it names the route and writes h's error.
func (s *Server) endpoint(route string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requestInfoFrom(r).route = route
		if err := h(w, r); err != nil {
			e := asAPIError(err, ledger.Unavailable)
			if e.status >= http.StatusInternalServerError {
				s.log.Error("request failed", "request_id", requestInfoFrom(r).id, "route", route, "status", e.status, "error", err)
			}
			writeError(w, e)
		}
	})
}

// middleware wraps the router: request id, panic recovery, one structured
// log line and the Prometheus metrics of each request.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{id: requestID(r), route: "unmatched"}
		w.Header().Set("X-Request-Id", info.id)
		rec := &statusRecorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))

		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic", "request_id", info.id, "route", info.route, "panic", p, "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, newError(http.StatusInternalServerError, codeInternalError, "internal error; it has been logged"))
				}
			}
			elapsed := time.Since(start)
			status := strconv.Itoa(rec.status)
			s.telemetry.requests.WithLabelValues(info.route, r.Method, status).Inc()
			s.telemetry.duration.WithLabelValues(info.route, status).Observe(elapsed.Seconds())
			s.log.LogAttrs(r.Context(), levelFor(rec.status), "request",
				slog.String("request_id", info.id),
				slog.String("method", r.Method),
				slog.String("route", info.route),
				slog.Int("status", rec.status),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
				slog.String("client_id", info.clientID),
				slog.String("session_id", info.sessionID),
			)
		}()
		next.ServeHTTP(rec, r)
	})
}

// requestID keeps a caller's X-Request-Id when it is short and plain, so
// that logs can be joined across services; otherwise it makes one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 64 && plain(id) {
		return id
	}
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
