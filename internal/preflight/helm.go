package preflight

import (
	"fmt"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// CheckHelm names the check of an Installation a Helm release renders.
const CheckHelm = "HelmManagedInstallation"

// Where Helm leaves its mark on the objects of a release.
const (
	helmReleaseAnnotation = "meta.helm.sh/release-name"
	helmNamespaceAnnot    = "meta.helm.sh/release-namespace"
	helmManagedByValue    = "Helm"
	// rke2Release is the chart RKE2 installs Calico with; its values are
	// changed through a HelmChartConfig of the same name in kube-system.
	rke2Release = "rke2-calico"
)

// HelmOwnership says how Helm marks the Installation, "" when it does not.
func HelmOwnership(inst *operatorv1.Installation) (evidence, release string) {
	if inst == nil {
		return "", ""
	}
	var signs []string
	if r := inst.Annotations[helmReleaseAnnotation]; r != "" {
		release = r
		signs = append(signs, fmt.Sprintf("annotation %s=%s", helmReleaseAnnotation, r))
	}
	if inst.Labels[calico.ManagedByLabel] == helmManagedByValue {
		signs = append(signs, fmt.Sprintf("label %s=%s", calico.ManagedByLabel, helmManagedByValue))
	}
	for _, e := range inst.ManagedFields {
		if strings.Contains(strings.ToLower(e.Manager), "helm") {
			signs = append(signs, fmt.Sprintf("field manager %q", e.Manager))
			break
		}
	}
	return strings.Join(signs, ", "), release
}

// helmManaged fails on an Installation rendered by a Helm chart (RKE2's
// rke2-calico, the tigera-operator chart): the next helm upgrade puts back
// every field winready changed, and on RKE2 the Windows agents run their own
// calico-node with settings from the chart. The message gives the chart
// values that carry the same changes.
func helmManaged(in Inputs, spec v1alpha1.PreflightSpec) v1alpha1.PreflightCheck {
	if in.HelmEvidence == "" {
		return result(CheckHelm, v1alpha1.CheckPass, "the Installation carries no mark of a Helm release")
	}
	values := helmValues(in)
	where := "the release's values (helm upgrade ... -f values.yaml)"
	if in.HelmRelease == rke2Release || provider(in).IsRKE2() {
		where = "a HelmChartConfig named rke2-calico in kube-system (apiVersion helm.cattle.io/v1, spec.valuesContent), which RKE2 " +
			"applies to its rke2-calico chart; on RKE2 the Windows agents also run their own calico-node from the chart's settings"
	}
	release := in.HelmRelease
	if release == "" {
		release = "a Helm release"
	}
	msg := fmt.Sprintf("Installation default is rendered by %s (%s): the next helm upgrade puts back every field winready changes. "+
		"Carry the same changes in %s:\n%s", release, in.HelmEvidence, where, values)
	if acknowledged(spec, v1alpha1.AcknowledgeHelmManagedInstallation) {
		return result(CheckHelm, v1alpha1.CheckWarn, "%s\n(acknowledged)", msg)
	}
	return result(CheckHelm, v1alpha1.CheckFail, "%s\nthen add HelmManagedInstallation to spec.preflight.acknowledge", msg)
}

// helmValues is the part of the chart values (tigera-operator and
// rke2-calico both take the Installation spec under "installation") that
// carries winready's changes.
func helmValues(in Inputs) string {
	var b strings.Builder
	b.WriteString("installation:\n  calicoNetwork:\n    bgp: Disabled\n    windowsDataplane: HNS\n")
	pools := calico.IPPools(in.Installation)
	if len(pools) > 0 {
		b.WriteString("    ipPools:  # keep each pool's other fields as they are\n")
		for _, p := range pools {
			fmt.Fprintf(&b, "    - name: %s\n      cidr: %s\n      encapsulation: VXLAN\n", p.Name, p.CIDR)
		}
	}
	if in.Installation != nil && len(in.Installation.Spec.ServiceCIDRs) > 0 {
		fmt.Fprintf(&b, "  serviceCIDRs: [%s]\n", strings.Join(in.Installation.Spec.ServiceCIDRs, ", "))
	} else {
		b.WriteString("  serviceCIDRs: [<the cluster's service network, e.g. 10.96.0.0/12>]\n")
	}
	return b.String()
}
