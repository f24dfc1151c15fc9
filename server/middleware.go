package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/evalmeter/evalmeter/api"
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
	// clientGone: the client closed its connection before the answer,
	// which is no error of ours.
	clientGone bool
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

// endpoint adapts h: it names the route and writes h's error. A refusal
// is written as it is; any other error is PostgreSQL being unavailable (a
// 503), the client having gone away (logged as such), or a bug (a 500).
func (s *Server) endpoint(route string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := requestInfoFrom(r)
		info.route = route
		if s.traced {
			nameSpan(r)
		}
		err := h(w, r)
		if err == nil {
			return
		}
		var refusal *apiError
		switch {
		case errors.As(err, &refusal):
		case r.Context().Err() != nil:
			// The client closed its connection while we worked: nothing
			// failed, and no one reads the answer.
			info.clientGone = true
			s.log.Info("client went away", "request_id", info.id, "route", route, "error", err)
			refusal = unavailable("the request was abandoned by the client")
		case ledger.Unavailable(err):
			s.log.Warn("ledger unavailable", "request_id", info.id, "route", route, "error", err)
			refusal = unavailable("the ledger is temporarily unavailable; retry after a moment")
		default:
			s.log.Error("request failed", "request_id", info.id, "route", route, "error", err)
			refusal = internalError(info.id)
		}
		writeError(w, refusal)
	})
}

// middleware wraps the router: request id, panic recovery, one structured
// log line and the Prometheus metrics of each request.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{id: requestID(r), route: routeUnmatched}
		w.Header().Set(api.HeaderRequestID, info.id)
		rec := &statusRecorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))

		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic", "request_id", info.id, "route", info.route, "panic", p, "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, internalError(info.id))
				}
			}
			elapsed := time.Since(start)
			code, level := rec.status, levelFor(rec.status)
			if info.clientGone {
				// nginx's "client closed request": not one of our 5xx.
				code, level = statusClientClosed, slog.LevelInfo
			}
			status := strconv.Itoa(code)
			s.telemetry.requests.WithLabelValues(info.route, r.Method, status).Inc()
			s.telemetry.duration.WithLabelValues(info.route, status).Observe(elapsed.Seconds())
			attrs := []slog.Attr{
				slog.String("request_id", info.id),
				slog.String("method", r.Method),
				slog.String("route", info.route),
				slog.Int("status", code),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
				slog.String("client_id", info.clientID),
				slog.String("session_id", info.sessionID),
			}
			if s.traced {
				attrs = append(attrs, traceAttrs(r)...)
				if info.route == routeUnmatched {
					forgetPath(r)
				}
			}
			s.log.LogAttrs(r.Context(), level, "request", attrs...)
		}()
		next.ServeHTTP(rec, r)
	})
}

// routeUnmatched is the route of a request that matched no operation (a
// 404 or 405), in logs, metrics and traces.
const routeUnmatched = "unmatched"

// statusClientClosed is what logs and metrics record for a request whose
// client went away before the answer.
const statusClientClosed = 499

// requestID keeps a caller's X-Request-Id when it is short and plain, so
// that logs can be joined across services; otherwise it makes one.
func requestID(r *http.Request) string {
	if id := r.Header.Get(api.HeaderRequestID); id != "" && len(id) <= 64 && plain(id) {
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
