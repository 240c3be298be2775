package preflight

import (
	"encoding/json"
	"fmt"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

func calicoAPI(in Inputs) v1alpha1.PreflightCheck {
	if in.CalicoAPIServed {
		return result(CheckCalicoAPI, v1alpha1.CheckPass, "projectcalico.org/v3 is served")
	}
	return result(CheckCalicoAPI, v1alpha1.CheckFail,
		"projectcalico.org/v3 is not served: the Tigera operator will not change IP pools without it. "+
			"Install the Calico API server (kubectl create -f apiserver.yaml with an APIServer named default) "+
			"or run Calico with native projectcalico.org/v3 CRDs, then wait for TigeraStatus apiserver Available")
}

// overlayInstallation fails on fields of Installation "overlay" that win
// over what winready writes into "default": the Tigera operator would render
// the overlay's value and winready would wait for a change that never comes
// (with bgp Enabled there, calico-node keeps BIRD forever), and a rollback
// could not put the originals back either.
func overlayInstallation(in Inputs) v1alpha1.PreflightCheck {
	if in.Overlay == nil {
		return result(CheckOverlay, v1alpha1.CheckPass, "no Installation overlay")
	}
	conflicts := calico.OverlayConflicts(in.Overlay)
	if len(conflicts) == 0 {
		return result(CheckOverlay, v1alpha1.CheckPass,
			"Installation overlay sets none of the fields winready changes (calicoNetwork.bgp, windowsDataplane, ipPools, serviceCIDRs)")
	}
	var sets []string
	calicoNetwork := map[string]any{}
	fix := map[string]any{}
	for _, c := range conflicts {
		sets = append(sets, fmt.Sprintf("spec.%s: %s", c.Path, c.Value))
		if field, ok := strings.CutPrefix(c.Path, "calicoNetwork."); ok {
			calicoNetwork[field] = nil
		} else {
			fix[c.Path] = nil
		}
	}
	if len(calicoNetwork) > 0 {
		fix["calicoNetwork"] = calicoNetwork
	}
	patch, _ := json.Marshal(map[string]any{"spec": fix})
	return result(CheckOverlay, v1alpha1.CheckFail,
		"Installation overlay sets %s; the Tigera operator merges the overlay over Installation default, so these win over "+
			"what winready writes into default and the migration would wait for a change that never comes. Remove them from "+
			"the overlay where it is managed (winready changes them in default, and restores them there on rollback), e.g. "+
			"kubectl patch installation overlay --type merge -p '%s'", strings.Join(sets, ", "), patch)
}

// cniPlugin refuses what makes the Tigera operator reject VXLAN pools: a CNI
// plugin other than Calico's ("... is invalid for ipPool.encapsulation when
// using non-Calico CNI, should be None") or Calico CNI with host-local IPAM
// ("VXLAN is invalid for ipPool.encapsulation with Calico CNI and HostLocal
// IPAM"), both from its validation.go.
func cniPlugin(in Inputs) v1alpha1.PreflightCheck {
	if in.Installation == nil || in.Installation.Spec.CNI == nil {
		return result(CheckCNI, v1alpha1.CheckPass, "spec.cni unset: the Tigera operator defaults it")
	}
	cni := in.Installation.Spec.CNI
	if cni.Type != "" && cni.Type != operatorv1.PluginCalico {
		return result(CheckCNI, v1alpha1.CheckFail,
			"the Installation's spec.cni.type is %s: the Tigera operator accepts only encapsulation None and no BGP with a CNI "+
				"other than Calico's, so pools cannot move to VXLAN; Windows nodes on this cluster follow that CNI's own Windows "+
				"support, not this migration", cni.Type)
	}
	if cni.IPAM != nil && cni.IPAM.Type == operatorv1.IPAMPluginHostLocal {
		return result(CheckCNI, v1alpha1.CheckFail,
			"the Installation's spec.cni.ipam.type is HostLocal: the Tigera operator rejects VXLAN pools with it (\"VXLAN is invalid "+
				"for ipPool.encapsulation with Calico CNI and HostLocal IPAM\"), and Windows nodes need Calico IPAM and strictAffinity; "+
				"moving to Calico IPAM is a reinstall of the pod network, outside this migration")
	}
	return result(CheckCNI, v1alpha1.CheckPass, "Calico CNI with Calico IPAM")
}

// linuxDataplane refuses the VPP dataplane: the Tigera operator's validation
// rejects bgp Disabled with it ("VPP requires BGP to be enabled").
func linuxDataplane(in Inputs) v1alpha1.PreflightCheck {
	dp := operatorv1.LinuxDataplaneIptables
	if in.Installation != nil && in.Installation.Spec.CalicoNetwork != nil && in.Installation.Spec.CalicoNetwork.LinuxDataplane != nil {
		dp = *in.Installation.Spec.CalicoNetwork.LinuxDataplane
	}
	if dp == operatorv1.LinuxDataplaneVPP {
		return result(CheckDataplane, v1alpha1.CheckFail,
			"the Installation's spec.calicoNetwork.linuxDataplane is VPP: the Tigera operator rejects bgp Disabled with it (\"VPP requires "+
				"BGP to be enabled\") and renders nothing, so this cluster cannot take Windows nodes with Calico's VXLAN; move it to the "+
				"Iptables, Nftables or BPF dataplane first")
	}
	return result(CheckDataplane, v1alpha1.CheckPass, "Linux dataplane %s", dp)
}

// kubeDNS fails when the DNS Service the Tigera operator's Windows
// controller looks up is absent: calico-windows would stay Degraded and no
// calico-node-windows would ever be rendered, after BGP is already off.
func kubeDNS(in Inputs) v1alpha1.PreflightCheck {
	if provider(in).IsOpenShift() {
		return result(CheckKubeDNS, v1alpha1.CheckInfo, "not checked on OpenShift (see %s)", CheckProvider)
	}
	if in.DNSServiceFound {
		return result(CheckKubeDNS, v1alpha1.CheckPass, "Service %s exists", in.DNSService)
	}
	return result(CheckKubeDNS, v1alpha1.CheckFail,
		"Service %s is missing: for kubernetesProvider %q the Tigera operator's Windows controller reads the cluster DNS "+
			"addresses from it, and without it TigeraStatus calico-windows stays Degraded (\"%s service not found\") and "+
			"calico-node-windows is never rendered. Create it (the cluster DNS Service, e.g. CoreDNS's) under that name, or "+
			"correct the Installation's spec.kubernetesProvider if it names the wrong platform",
		in.DNSService, providerName(in), in.DNSService.Name)
}

func provider(in Inputs) operatorv1.Provider {
	if in.Installation == nil {
		return operatorv1.ProviderNone
	}
	return in.Installation.Spec.KubernetesProvider
}

func providerName(in Inputs) string {
	if p := provider(in); p != operatorv1.ProviderNone {
		return string(p)
	}
	return "none (kubeadm and other upstream distributions)"
}

// kubernetesProvider shows the platform the Tigera operator renders for, and
// refuses the one winready does not migrate.
func kubernetesProvider(in Inputs) v1alpha1.PreflightCheck {
	if provider(in).IsOpenShift() {
		return result(CheckProvider, v1alpha1.CheckFail,
			"kubernetesProvider OpenShift is not supported: on OpenShift the cluster network and Windows nodes are managed "+
				"by the cluster's own operators (the Windows Machine Config Operator), not by this migration; change the "+
				"network there instead")
	}
	return result(CheckProvider, v1alpha1.CheckInfo, "kubernetesProvider %s; the cluster DNS Service for it is %s",
		providerName(in), calico.DNSService(provider(in)))
}

// The Calico minors the core scenarios pass on against the real Tigera
// operator (make e2e E2E_OPERATORS=...; docs/install.md, "Calico versions"):
// v3.28.1 (operator v1.35.0) to v3.32.1 (operator v1.42.3).
var (
	OldestTestedCalico = version.MajorMinor(3, 28)
	NewestTestedCalico = version.MajorMinor(3, 32)
)

// calicoVersion fails on a Calico older than the oldest tested one unless a
// person acknowledges it (the operators before v1.34 have no IP pool
// controller, and before v1.31 no Windows support, so the migration cannot
// work there), warns on one newer than the newest tested, and passes in
// between. Calico Enterprise numbers its releases apart: it is reported.
func calicoVersion(in Inputs, spec v1alpha1.PreflightSpec) v1alpha1.PreflightCheck {
	if in.Installation == nil || in.Installation.Status.CalicoVersion == "" {
		return result(CheckCalicoVersion, v1alpha1.CheckInfo, "the Installation does not report a Calico version yet")
	}
	st := in.Installation.Status
	if st.Variant.IsEnterprise() {
		return result(CheckCalicoVersion, v1alpha1.CheckInfo, "Calico %s (%s): not in winready's table of tested versions", st.CalicoVersion, st.Variant)
	}
	tested := fmt.Sprintf("v%d.%d to v%d.%d", OldestTestedCalico.Major(), OldestTestedCalico.Minor(),
		NewestTestedCalico.Major(), NewestTestedCalico.Minor())
	v, err := version.ParseGeneric(st.CalicoVersion)
	if err != nil {
		return result(CheckCalicoVersion, v1alpha1.CheckWarn, "Calico %q (%s) is not a version winready can read: it is tested with Calico %s",
			st.CalicoVersion, st.Variant, tested)
	}
	minor := version.MajorMinor(v.Major(), v.Minor())
	switch {
	case minor.LessThan(OldestTestedCalico):
		why := fmt.Sprintf("Calico %s is older than winready's oldest tested version (it is tested with Calico %s): "+
			"before v3.28 the Tigera operator has no IP pool controller, so an encapsulation change in the Installation "+
			"never reaches the IPPools, and before v3.27 it has no Windows support (docs/install.md, Calico versions)", st.CalicoVersion, tested)
		if acknowledged(spec, v1alpha1.AcknowledgeUntestedCalicoVersion) {
			return result(CheckCalicoVersion, v1alpha1.CheckWarn, "%s (acknowledged)", why)
		}
		return result(CheckCalicoVersion, v1alpha1.CheckFail, "%s; upgrade Calico, or add UntestedCalicoVersion to spec.preflight.acknowledge", why)
	case NewestTestedCalico.LessThan(minor):
		return result(CheckCalicoVersion, v1alpha1.CheckWarn,
			"Calico %s is newer than winready's newest tested version (it is tested with Calico %s): what the Tigera operator does with the Installation may have changed",
			st.CalicoVersion, tested)
	}
	return result(CheckCalicoVersion, v1alpha1.CheckPass, "Calico %s (%s): winready is tested with Calico %s", st.CalicoVersion, st.Variant, tested)
}

// CalicoVersionOf is the CalicoVersion check on Installation inst alone:
// kubectl winready check --pre judges the version as the preflight does,
// before winready is installed and without gathering the rest.
func CalicoVersionOf(inst *operatorv1.Installation, spec v1alpha1.PreflightSpec) v1alpha1.PreflightCheck {
	return calicoVersion(Inputs{Installation: inst}, spec)
}
