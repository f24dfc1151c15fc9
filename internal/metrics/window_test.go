package metrics_test

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// window is the engine's index window (scan.go): the test moves every
// body across its boundaries.
const window = 4096

var atByte = regexp.MustCompile(`at byte (\d+)`)

// TestWindowBoundaries puts white space before each corpus body so that
// the boundaries between the windows of the index fall on each of its
// first bytes (every byte of the smaller bodies; in a larger one, each
// padding moves all its boundaries at once), and checks that the answer
// is the unshifted body's: the same metrics, or the same error with its
// byte offset moved by the padding. Strings that straddle a boundary, and
// numbers, escapes and structure at one, take other paths than those
// inside a window. The fast path does not use the index, so the test reads
// every body carefully.
func TestWindowBoundaries(t *testing.T) {
	bodies := 0
	for name, body := range corpus(t) {
		want, wantErr := metrics.ComputeCarefully(body)
		offsets := len(body)
		if offsets > 600 {
			offsets = 64
		}
		for at := 0; at <= offsets; at++ {
			pad := window - at%window
			shifted := append(bytes.Repeat([]byte{' '}, pad), body...)
			got, err := metrics.ComputeCarefully(shifted)
			if msg := sameAnswer(want, wantErr, got, err, pad); msg != "" {
				t.Fatalf("%s with the window boundary at byte %d: %s", name, at, msg)
			}
		}
		bodies++
	}
	if bodies < 100 {
		t.Fatalf("only %d bodies in the corpus", bodies)
	}
}

// sameAnswer compares the answers to a body and to it behind pad bytes of
// white space, and says how they differ.
func sameAnswer(want *api.Metrics, wantErr error, got *api.Metrics, err error, pad int) string {
	if (wantErr == nil) != (err == nil) {
		return fmt.Sprintf("error %v, want %v", err, wantErr)
	}
	if err == nil {
		if diff := cmp.Diff(want, got); diff != "" {
			return "metrics differ (-want +got):\n" + diff
		}
		return ""
	}
	var w, g *api.Error
	if !errors.As(wantErr, &w) || !errors.As(err, &g) {
		return fmt.Sprintf("errors %T and %T, want *api.Error", wantErr, err)
	}
	wantMsg := atByte.ReplaceAllStringFunc(w.Message, func(s string) string {
		n, _ := strconv.Atoi(atByte.FindStringSubmatch(s)[1])
		return "at byte " + strconv.Itoa(n+pad)
	})
	if g.Code != w.Code || g.Field != w.Field || g.Message != wantMsg {
		return fmt.Sprintf("error %s %q %q, want %s %q %q", g.Code, g.Field, g.Message, w.Code, w.Field, wantMsg)
	}
	return ""
}
