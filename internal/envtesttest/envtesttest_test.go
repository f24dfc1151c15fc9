package envtesttest_test

import (
	"context"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/evalmeter/evalmeter/internal/envtesttest"
)

// TestNew: the API server answers, with the project's CRD installed.
func TestNew(t *testing.T) {
	env := envtesttest.New(t, filepath.Join("..", "..", "config", "crd", "bases"))
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(context.Background(), client.ObjectKey{Name: "clientagreements.evalmeter.io"}, &crd); err != nil {
		t.Fatal(err)
	}
}

// TestStartMissingCRDs: a CRD directory that does not exist is an error.
func TestStartMissingCRDs(t *testing.T) {
	env, err := envtesttest.Start(filepath.Join(t.TempDir(), "missing"))
	if err == nil {
		env.Stop()
		t.Fatal("Start with a missing CRD directory succeeded")
	}
}
