package metrics_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"testing"

	"github.com/evalmeter/evalmeter/api"

	"github.com/google/go-cmp/cmp"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// vector is one case of testdata/metrics-vectors.json, computed by an
// independent implementation of docs/design.md#4-metrics-rules and #5-validation-and-the-order-of-checks.
type vector struct {
	Name   string `json:"name"`
	Body   string `json:"body"`
	Expect struct {
		Status  int            `json:"status"`
		Field   *string        `json:"field"`
		Metrics map[string]any `json:"metrics"`
	} `json:"expect"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	raw, err := os.ReadFile("testdata/metrics-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 100 {
		t.Fatalf("only %d vectors loaded", len(file.Vectors))
	}
	return file.Vectors
}

func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			got, err := metrics.Compute([]byte(v.Body))
			status := http.StatusOK
			var merr *api.Error
			if err != nil {
				if !errors.As(err, &merr) {
					t.Fatalf("error is %T, not *api.Error: %v", err, err)
				}
				status = merr.Status()
			}
			if status != v.Expect.Status {
				t.Fatalf("status = %d (%v), want %d", status, err, v.Expect.Status)
			}
			switch status {
			case http.StatusUnprocessableEntity:
				want := ""
				if v.Expect.Field != nil {
					want = *v.Expect.Field
				}
				if merr.Field != want {
					t.Errorf("error.field = %q, want %q (%s)", merr.Field, want, merr.Message)
				}
			case http.StatusOK:
				// Compare as decoded JSON: numbers become float64 on both sides.
				raw, err := json.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				var decoded map[string]any
				if err := json.Unmarshal(raw, &decoded); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(v.Expect.Metrics, decoded); diff != "" {
					t.Errorf("metrics differ (-want +got):\n%s", diff)
				}
			}
		})
	}
}
