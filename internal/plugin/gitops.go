package plugin

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FieldManager is the field manager of every change the plugin makes, so
// that Argo CD can be told to leave them alone (ignoreDifferences with
// managedFieldsManagers, docs/gitops.md).
const FieldManager = "kubectl-winready"

// gitOpsManagers are the field managers of the GitOps controllers that put
// back what they applied, by the tool they belong to.
var gitOpsManagers = map[string]string{
	"argocd-controller":             "Argo CD",
	"argocd-application-controller": "Argo CD",
	"kustomize-controller":          "Flux",
	"helm-controller":               "Flux",
}

// gitOpsOwner says which GitOps tool owns obj and how it tells, or "" when
// none does: a GitOps tool puts back a change made beside it at its next
// sync (Argo CD with selfHeal at once, Flux at its next interval).
func gitOpsOwner(obj metav1.Object) string {
	var managers []string
	for _, m := range obj.GetManagedFields() {
		if tool, ok := gitOpsManagers[m.Manager]; ok {
			managers = append(managers, fmt.Sprintf("%s (field manager %s)", tool, m.Manager))
		}
	}
	if len(managers) > 0 {
		slices.Sort(managers)
		return slices.Compact(managers)[0]
	}
	annotations, labels := obj.GetAnnotations(), obj.GetLabels()
	if _, ok := annotations["argocd.argoproj.io/tracking-id"]; ok {
		return "Argo CD (annotation argocd.argoproj.io/tracking-id)"
	}
	for _, l := range []string{"kustomize.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/name"} {
		if _, ok := labels[l]; ok {
			return "Flux (label " + l + ")"
		}
	}
	// Argo CD's label tracking uses app.kubernetes.io/instance, which Helm
	// charts and people set too: only with another mark of Argo CD.
	if _, ok := labels["app.kubernetes.io/instance"]; ok && (hasArgoKey(annotations) || hasArgoKey(labels)) {
		return "Argo CD (label app.kubernetes.io/instance)"
	}
	return ""
}

func hasArgoKey(m map[string]string) bool {
	for k := range m {
		if strings.HasPrefix(k, "argocd.argoproj.io/") {
			return true
		}
	}
	return false
}
