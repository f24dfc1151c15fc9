// Package envtesttest starts a real kube-apiserver and etcd for tests
// (controller-runtime's envtest), from the binaries in KUBEBUILDER_ASSETS or,
// when it is unset, those hack/offline/envtest.sh builds.
//
// A test that wants an API server of its own:
//
//	env := envtesttest.New(t) // stopped when the test ends
//	c, err := client.New(env.Config, client.Options{})
//
// A suite that shares one from TestMain, where there is no t:
//
//	env, err := envtesttest.Start(filepath.Join("..", "config", "crd", "bases"))
//	if err != nil { ... }
//	defer env.Stop()
package envtesttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Assets returns KUBEBUILDER_ASSETS or, when it is unset, the directory that
// hack/offline/envtest.sh, of the module holding the working directory, builds
// kube-apiserver, etcd and kubectl into (the first build takes minutes; its
// progress goes to stderr).
func Assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "hack", "offline", "envtest.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("envtesttest: hack/offline/envtest.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Start starts a kube-apiserver and etcd from Assets, with the CRDs of
// crdDirs installed (each directory must exist), and returns the environment:
// its Config is an administrator's, and the caller stops it with Stop.
func Start(crdDirs ...string) (*envtest.Environment, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	if _, err := env.Start(); err != nil {
		env.Stop() // whatever did start
		return nil, fmt.Errorf("envtesttest: start kube-apiserver and etcd: %w", err)
	}
	return env, nil
}

// New starts an environment as Start does, fails t when it cannot, and stops
// the environment when t ends.
func New(t testing.TB, crdDirs ...string) *envtest.Environment {
	t.Helper()
	env, err := Start(crdDirs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Stop() })
	return env
}

// moduleRoot is the directory of the main module, the one holding the
// working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("envtesttest: no go.mod above the working directory, so no hack/offline/envtest.sh (go env GOMOD: %q, %v)", gomod, err)
	}
	return filepath.Dir(gomod), nil
}
