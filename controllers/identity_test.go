package controllers_test

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/evalmeter/evalmeter/internal/charttest"
)

// controllerNamespace is where the chart is "installed" for the tests.
const controllerNamespace = "evalmeter-system"

// asChartServiceAccount applies the ServiceAccounts and RBAC objects the
// chart renders with values, and returns cfg impersonating the controller's
// ServiceAccount: the manager then runs with exactly the chart's grants,
// not envtest's admin identity.
func asChartServiceAccount(ctx context.Context, cfg *rest.Config, values map[string]any) (*rest.Config, error) {
	admin, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	objs, err := charttest.Render(filepath.Join("..", "charts", "evalmeter"), controllerNamespace, values)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	namespaces := map[string]bool{controllerNamespace: true}
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			if o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" && o.GetNamespace() == "" {
				o.SetNamespace(controllerNamespace) // Helm leaves the release namespace implicit
			}
			if ns := o.GetNamespace(); ns != "" {
				namespaces[ns] = true
			}
			apply = append(apply, o)
		}
	}
	for ns := range namespaces {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("Namespace")
		o.SetName(ns)
		if err := admin.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	for _, o := range apply {
		if err := admin.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s-controller", controllerNamespace, charttest.Release),
	}
	return sa, nil
}
