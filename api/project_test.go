package api_test

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	evalmeterv1alpha1 "github.com/evalmeter/evalmeter/api/v1alpha1"
)

// PROJECT records the one resource as kubebuilder v4 would, and the
// controller is where docs/design.md#21-why-controllers-is-at-the-top-level
// says, not in the scaffold's internal/controller.
func TestProjectFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Domain      string   `json:"domain"`
		Layout      []string `json:"layout"`
		ProjectName string   `json:"projectName"`
		Repo        string   `json:"repo"`
		Version     string   `json:"version"`
		Resources   []struct {
			API struct {
				CRDVersion string `json:"crdVersion"`
				Namespaced bool   `json:"namespaced"`
			} `json:"api"`
			Controller bool   `json:"controller"`
			Domain     string `json:"domain"`
			Group      string `json:"group"`
			Kind       string `json:"kind"`
			Path       string `json:"path"`
			Version    string `json:"version"`
		} `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(b, &project); err != nil {
		t.Fatalf("PROJECT: %v", err)
	}
	if len(project.Layout) != 1 || project.Layout[0] != "go.kubebuilder.io/v4" {
		t.Errorf("layout %v, want [go.kubebuilder.io/v4]", project.Layout)
	}
	if len(project.Resources) != 1 {
		t.Fatalf("%d resources in PROJECT, want 1 (ClientAgreement)", len(project.Resources))
	}
	r := project.Resources[0]
	gv := evalmeterv1alpha1.GroupVersion
	if got := r.Group + "." + r.Domain; got != gv.Group || r.Domain != project.Domain {
		t.Errorf("PROJECT's group %s, domain %s (project's %s); the API's group is %s", r.Group, r.Domain, project.Domain, gv.Group)
	}
	if r.Version != gv.Version || r.Kind != "ClientAgreement" || !r.API.Namespaced || r.API.CRDVersion != "v1" || !r.Controller {
		t.Errorf("PROJECT's resource %+v; want the namespaced v1 CRD ClientAgreement %s with a controller", r, gv.Version)
	}
	if want := project.Repo + "/api/" + gv.Version; r.Path != want {
		t.Errorf("PROJECT's path %s, want %s", r.Path, want)
	}
	if _, err := os.Stat(filepath.Join("..", "controllers", "clientagreement_controller.go")); err != nil {
		t.Errorf("the controller is not in controllers/: %v", err)
	}
	if _, err := os.Stat(filepath.Join("..", "internal", "controller")); !os.IsNotExist(err) {
		t.Errorf("internal/controller exists (%v): the controller lives in controllers/ alone", err)
	}
}
