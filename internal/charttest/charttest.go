// Package charttest renders the Helm chart as `helm install --dry-run`
// would, for tests that check what it renders against a real API server.
package charttest

import (
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Release is the release name the objects are rendered under.
const Release = "evalmeter"

// KubeVersion is the Kubernetes version charts are rendered for by
// default: envtest's.
const KubeVersion = "v1.36.3"

// Render renders the chart in dir with values, installed in namespace of
// a cluster of KubeVersion.
func Render(dir, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	return RenderFor(dir, KubeVersion, namespace, values)
}

// RenderFor renders for a cluster that reports kubeVersion ("v1.31.1-gke.1146000").
func RenderFor(dir, kubeVersion, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	return RenderRelease(dir, Release, kubeVersion, namespace, values)
}

// RenderRelease renders under the release name release.
func RenderRelease(dir, release, kubeVersion, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	rel, err := install(dir, release, kubeVersion, namespace, values)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var o unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			return nil, fmt.Errorf("%v:\n%s", err, doc)
		}
		if len(o.Object) > 0 {
			objs = append(objs, &o)
		}
	}
	return objs, nil
}

// Notes renders the chart's NOTES.txt, as helm install prints it.
func Notes(dir, namespace string, values map[string]any) (string, error) {
	rel, err := install(dir, Release, KubeVersion, namespace, values)
	if err != nil {
		return "", err
	}
	return rel.Info.Notes, nil
}

// install runs helm install as a client-only dry run.
func install(dir, releaseName, kubeVersion, namespace string, values map[string]any) (*release.Release, error) {
	chart, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	v, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	v.Version = kubeVersion // as the cluster reports it, a provider's suffix included
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = releaseName, namespace
	install.KubeVersion = v
	return install.Run(chart, values)
}
