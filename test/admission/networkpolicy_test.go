package admission_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
)

// peer is a pod as a NetworkPolicy sees it.
type peer struct {
	namespace string
	labels    map[string]string
}

// icmp stands for ICMP, which a NetworkPolicy port cannot name: only a rule
// without ports admits it.
const icmp corev1.Protocol = "ICMP"

// ingressAllowed is whether policies (networking.k8s.io/v1 semantics) let
// from reach to on protocol and port: a pod no policy selects for ingress
// accepts everything; a selected one, what some rule of a selecting policy
// allows. Pods on the host network are never selected.
func ingressAllowed(policies []networkingv1.NetworkPolicy, to, from peer, protocol corev1.Protocol, port int32) bool {
	isolated := false
	for _, p := range policies {
		if p.Namespace != to.namespace || !selects(&p.Spec.PodSelector, to.labels) ||
			!slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		isolated = true
		for _, rule := range p.Spec.Ingress {
			if peersMatch(rule.From, p.Namespace, from) && portsMatch(rule.Ports, protocol, port) {
				return true
			}
		}
	}
	return !isolated
}

func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	Expect(err).NotTo(HaveOccurred())
	return s.Matches(labels.Set(set))
}

func peersMatch(peers []networkingv1.NetworkPolicyPeer, ns string, from peer) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		Expect(p.IPBlock).To(BeNil(), "no address block: pods are matched by their labels")
		inNamespace := from.namespace == ns
		if p.NamespaceSelector != nil {
			inNamespace = selects(p.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": from.namespace})
		}
		if inNamespace && (p.PodSelector == nil || selects(p.PodSelector, from.labels)) {
			return true
		}
	}
	return false
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, protocol corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto == protocol && (p.Port == nil || p.Port.IntValue() == int(port)) {
			return true
		}
	}
	return false
}

var _ = Describe("The probe namespace's NetworkPolicies", func() {
	It("let only the pod network check's pods reach one another", func() {
		var policies []networkingv1.NetworkPolicy
		for _, o := range installed {
			if o.GetKind() != "NetworkPolicy" {
				continue
			}
			np := networkingv1.NetworkPolicy{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &np)).To(Succeed())
			Expect(np.Namespace).To(Equal(probeNS))
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&np), &networkingv1.NetworkPolicy{})).To(Succeed(), "installed")
			policies = append(policies, np)
		}
		Expect(policies).NotTo(BeEmpty())

		checkPod := podCheckDaemonSet().Spec.Template
		Expect(checkPod.Spec.HostNetwork).To(BeFalse())
		check := peer{probeNS, checkPod.Labels}
		Expect(ingressAllowed(policies, check, check, corev1.ProtocolTCP, podcheck.Port)).To(BeTrue(), "the echo, between check pods")
		Expect(ingressAllowed(policies, check, check, icmp, 0)).To(BeTrue(), "the ping, between check pods")

		elsewhere := peer{"default", checkPod.Labels}
		Expect(ingressAllowed(policies, check, elsewhere, corev1.ProtocolTCP, podcheck.Port)).To(BeFalse(),
			"a pod in another namespace, even labelled as a check pod")
		Expect(ingressAllowed(policies, check, elsewhere, icmp, 0)).To(BeFalse())
		other := peer{probeNS, map[string]string{"app.kubernetes.io/name": "winready", "app.kubernetes.io/component": "other"}}
		Expect(ingressAllowed(policies, check, other, corev1.ProtocolTCP, podcheck.Port)).To(BeFalse(), "another pod here")
		Expect(ingressAllowed(policies, other, check, corev1.ProtocolTCP, 8080)).To(BeFalse(),
			"another pod here on the pod network accepts nothing either")

		// The UDP probe's pods use the host network, which NetworkPolicy does
		// not reach: their packets are authenticated instead.
		Expect(probeDaemonSet(managerImage).Spec.Template.Spec.HostNetwork).To(BeTrue())
	})
})
