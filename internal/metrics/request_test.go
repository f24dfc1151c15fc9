package metrics

import (
	"testing"

	"github.com/evalmeter/evalmeter/internal/swar/swartest"
)

// TestNotID: notID marks exactly the bytes that isIDByte refuses.
func TestNotID(t *testing.T) {
	swartest.Exact(t, "notID", notID, func(c byte) bool { return !isIDByte(c) })
}
