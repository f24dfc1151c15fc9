package api

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"sigs.k8s.io/yaml"
)

// openAPI is the part of the OpenAPI document that the constants of this
// package must agree with.
type openAPI struct {
	Paths      map[string]map[string]struct{ Responses map[string]any } `json:"paths"`
	Components struct {
		Schemas struct {
			ErrorEnvelope struct {
				Properties struct {
					Error struct {
						Properties struct {
							Code struct {
								Enum []string `json:"enum"`
							} `json:"code"`
						} `json:"properties"`
					} `json:"error"`
				} `json:"properties"`
			} `json:"ErrorEnvelope"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) openAPI {
	t.Helper()
	var doc openAPI
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestCodesMatchOpenAPI: the error codes here are the document's enum, and
// each code's status is a response some operation declares.
func TestCodesMatchOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	enum := doc.Components.Schemas.ErrorEnvelope.Properties.Error.Properties.Code.Enum
	if got, want := slices.Sorted(maps.Keys(statuses)), slices.Sorted(slices.Values(enum)); !slices.Equal(got, want) {
		t.Errorf("codes with a status:\n %v\nthe document's enum:\n %v", got, want)
	}
	declared := map[string]bool{}
	for _, ops := range doc.Paths {
		for _, op := range ops {
			for status := range op.Responses {
				declared[status] = true
			}
		}
	}
	for code := range statuses {
		status := (&Error{Code: code}).Status()
		// 404 and 405 answer paths and methods that the document does not
		// list, and 500 may answer any operation.
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusInternalServerError {
			continue
		}
		if !declared[strconv.Itoa(status)] {
			t.Errorf("%s: status %d is declared by no operation", code, status)
		}
	}
	if s := (&Error{Code: "no_such_code"}).Status(); s != http.StatusInternalServerError {
		t.Errorf("an unknown code: status %d, want 500", s)
	}
}

// TestPathsMatchOpenAPI: the paths here are the document's.
func TestPathsMatchOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	got := []string{PathSchema, PathSessions, PathMetrics, PathUsage, PathReceiptKeys}
	if want := slices.Sorted(maps.Keys(doc.Paths)); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("paths %v, the document's %v", got, want)
	}
}
