package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// PruneOnce is one round of PruneMetrics, for tests.
var PruneOnce = (*Server).pruneOnce

// ReadBodyError is the refusal readBody makes of r's body: its status,
// error.code and message.
func ReadBodyError(r *http.Request) (status int, code, message string) {
	_, err := readBody(httptest.NewRecorder(), r, make([]byte, metrics.MaxBodyBytes+1))
	var e *apiError
	if !errors.As(err, &e) {
		return 0, "", fmt.Sprint(err)
	}
	return e.status(), e.body.Code, e.body.Message
}
