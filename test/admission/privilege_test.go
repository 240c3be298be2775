package admission_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	installpkg "github.com/winready/winready/test/install"
)

const (
	agentSA = "system:serviceaccount:winready-probe:winready-probe"
	checkSA = "system:serviceaccount:winready-probe:winready-podcheck"
)

func managerDeployment(objs []*unstructured.Unstructured) *appsv1.Deployment {
	d, err := installpkg.ManagerDeployment(objs)
	Expect(err).NotTo(HaveOccurred(), "config/default")
	return d
}

func allowed(user string, attrs authorizationv1.ResourceAttributes) bool {
	ns := strings.Split(user, ":")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns[len(ns)-2]},
		ResourceAttributes: &attrs,
	}}
	Expect(k8s.Create(ctx, sar)).To(Succeed())
	return sar.Status.Allowed
}

// access is one request: namespace, verb, group, resource, name.
type access struct{ ns, verb, group, resource, name string }

func (a access) attrs() authorizationv1.ResourceAttributes {
	resource, sub, _ := strings.Cut(a.resource, "/")
	return authorizationv1.ResourceAttributes{Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: resource, Subresource: sub, Name: a.name}
}

// managerMay is every request the manager's rules allow, the name where a
// rule names it. Each rule of config/default must be covered by one.
var managerMay = []access{
	{"", "get", "winready.io", "windowsreadinesses", ""},
	{"", "watch", "winready.io", "windowsreadinesses", ""},
	{"", "patch", "winready.io", "windowsreadinesses/status", "default"},
	{"", "watch", "operator.tigera.io", "installations", ""},
	{"", "patch", "operator.tigera.io", "installations", "default"},
	{"", "watch", "operator.tigera.io", "tigerastatuses", ""},
	{"", "get", "apiregistration.k8s.io", "apiservices", "v3.projectcalico.org"},
	// Its own admission policies and bindings, waited for before its first
	// write (internal/cli/bounds.go).
	{"", "get", "admissionregistration.k8s.io", "validatingadmissionpolicies", "winready-manager-installation"},
	{"", "get", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "winready-windows-node-gate-calico"},
	{"", "list", "operator.tigera.io", "imagesets", ""},
	{"", "create", "projectcalico.org", "ipamconfigurations", ""},
	{"", "patch", "projectcalico.org", "ipamconfigurations", "default"},
	{"", "delete", "projectcalico.org", "ipamconfigurations", "default"},
	{"", "get", "projectcalico.org", "felixconfigurations", "default"},
	{"", "list", "projectcalico.org", "ippools", ""},
	{"", "list", "projectcalico.org", "bgppeers", ""},
	{"", "list", "crd.projectcalico.org", "ipamblocks", ""},
	{"", "watch", "crd.projectcalico.org", "ipamblocks", ""},
	{"", "watch", "projectcalico.org", "ipamblocks", ""},
	{"", "list", "networking.k8s.io", "networkpolicies", ""},
	{"", "list", "networking.k8s.io", "servicecidrs", ""},
	{"", "list", "apps", "daemonsets", ""},
	{"", "watch", "", "nodes", ""},
	{"calico-system", "watch", "apps", "daemonsets", ""},
	{"calico-system", "watch", "", "pods", ""},
	{"calico-system", "patch", "apps", "daemonsets", "calico-node"},
	{"calico-system", "get", "apps", "deployments", "calico-typha"},
	{"default", "list", "discovery.k8s.io", "endpointslices", ""},
	{"default", "get", "", "services", "kubernetes"},
	{"default", "create", "events.k8s.io", "events", ""},
	{"tigera-operator", "create", "", "configmaps", ""},
	{"tigera-operator", "watch", "", "configmaps", "kubernetes-services-endpoint"},
	{"tigera-operator", "patch", "", "configmaps", "kubernetes-services-endpoint"},
	{"tigera-operator", "delete", "", "configmaps", "kubernetes-services-endpoint"},
	{"winready-system", "create", "", "configmaps", ""},
	{"winready-system", "get", "", "configmaps", "winready-originals"},
	{"winready-system", "get", "", "configmaps", "kube-root-ca.crt"},
	{"winready-system", "delete", "", "configmaps", "winready-originals"},
	{"winready-system", "create", "coordination.k8s.io", "leases", ""},
	{"winready-system", "update", "coordination.k8s.io", "leases", "winready.winready.io"},
	{"winready-system", "create", "", "events", ""},
	{"winready-system", "patch", "", "events", ""},
	{"winready-probe", "create", "apps", "daemonsets", ""},
	{"winready-probe", "delete", "apps", "daemonsets", "winready-probe"},
	{"winready-probe", "create", "", "configmaps", ""},
	{"winready-probe", "watch", "", "configmaps", ""},
	{"winready-probe", "deletecollection", "", "configmaps", ""},
	{"winready-probe", "list", "", "configmaps", ""},
	{"winready-probe", "create", "", "secrets", ""},
	{"winready-probe", "delete", "", "secrets", "winready-probe"},
	{"winready-probe", "delete", "apps", "daemonsets", "winready-podcheck"},
	{"winready-probe", "create", "", "services", ""},
	{"winready-probe", "get", "", "services", "winready-podcheck"},
	{"winready-probe", "delete", "", "services", "winready-podcheck"},
	{"kube-system", "get", "", "configmaps", "kubeadm-config"},
	{"kube-system", "get", "", "services", "kube-dns"},
	{"kube-system", "get", "", "services", "rke2-coredns-rke2-coredns"},
	{"kube-public", "get", "", "configmaps", "cluster-info"},
	// The metrics endpoint's questions about each scraper.
	{"", "create", "authentication.k8s.io", "tokenreviews", ""},
	{"", "create", "authorization.k8s.io", "subjectaccessreviews", ""},
}

// managerMayNot are the neighbours of those requests.
var managerMayNot = []access{
	{"", "create", "admissionregistration.k8s.io", "validatingadmissionpolicies", ""},
	{"", "update", "admissionregistration.k8s.io", "validatingadmissionpolicies", "winready-windows-node-gate"},
	{"", "delete", "admissionregistration.k8s.io", "validatingadmissionpolicies", "other-policy"},
	{"", "delete", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "winready-probe-daemonset"},
	{"", "patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "other"},
	{"", "get", "admissionregistration.k8s.io", "validatingadmissionpolicies", "other-policy"},
	{"", "list", "admissionregistration.k8s.io", "validatingadmissionpolicies", ""},
	{"", "watch", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", ""},
	{"", "get", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "winready-manager-installation"},
	{"", "update", "winready.io", "windowsreadinesses", "default"},
	{"", "patch", "winready.io", "windowsreadinesses/status", "other"},
	{"", "patch", "operator.tigera.io", "installations", "other"},
	{"", "delete", "operator.tigera.io", "installations", "default"},
	{"", "get", "apiregistration.k8s.io", "apiservices", "v1.apps"},
	{"", "delete", "operator.tigera.io", "imagesets", "calico-v3.32.0"},
	{"", "delete", "projectcalico.org", "ipamconfigurations", "other"},
	{"", "patch", "projectcalico.org", "ippools", "default-ipv4-ippool"},
	{"", "patch", "", "nodes", "linux-0"},
	{"", "list", "", "secrets", ""},
	{"winready-system", "get", "", "secrets", "any"},
	{"winready-probe", "get", "", "secrets", "any"},
	{"tigera-operator", "get", "", "secrets", "any"},
	{"tigera-operator", "get", "", "configmaps", "other"},
	{"tigera-operator", "patch", "", "configmaps", "other"},
	{"tigera-operator", "delete", "", "configmaps", "other"},
	{"tigera-operator", "watch", "", "configmaps", ""},
	{"winready-system", "get", "", "configmaps", "other"},
	{"winready-system", "delete", "", "configmaps", "other"},
	{"winready-system", "list", "", "configmaps", ""},
	{"winready-system", "update", "coordination.k8s.io", "leases", "other"},
	{"winready-system", "create", "apps", "daemonsets", ""},
	{"winready-system", "create", "", "pods", ""},
	{"default", "create", "apps", "daemonsets", ""},
	{"calico-system", "create", "apps", "daemonsets", ""},
	{"calico-system", "patch", "apps", "daemonsets", "calico-node-windows"},
	{"calico-system", "update", "apps", "daemonsets", "calico-node"},
	{"calico-system", "get", "apps", "deployments", "calico-kube-controllers"},
	{"kube-system", "create", "apps", "daemonsets", ""},
	{"winready-probe", "delete", "apps", "daemonsets", "other"},
	{"winready-probe", "update", "apps", "daemonsets", "winready-probe"},
	{"winready-probe", "create", "", "pods", ""},
	{"winready-probe", "get", "", "configmaps", "other"},
	{"winready-probe", "get", "", "secrets", "winready-probe"},
	{"winready-probe", "delete", "", "secrets", "other"},
	{"kube-system", "get", "", "configmaps", "coredns"},
	{"kube-system", "create", "", "configmaps", ""},
	{"default", "list", "", "configmaps", ""},
	{"winready-probe", "create", "", "serviceaccounts/token", "winready-probe"},
	{"", "create", "certificates.k8s.io", "certificatesigningrequests", ""},
}

// agentMay and agentMayNot are the probe agents' requests: read or watch
// their own plan (RBAC cannot name it, a plan holds nothing secret), read the
// round's key; which report an agent may write is left to admission (below).
var agentMay = []access{
	{"winready-probe", "get", "", "configmaps", "winready-probe-plan-linux-0"},
	{"winready-probe", "watch", "", "configmaps", ""},
	{"winready-probe", "get", "", "secrets", "winready-probe"},
	{"winready-probe", "create", "", "configmaps", ""},
	{"winready-probe", "update", "", "configmaps", "winready-probe-report-linux-0"},
}

var agentMayNot = []access{
	{"winready-probe", "delete", "", "configmaps", "winready-probe-plan-linux-0"},
	{"winready-probe", "list", "", "configmaps", ""},
	{"winready-probe", "get", "", "secrets", "any"},
	{"winready-probe", "list", "", "secrets", ""},
	{"winready-probe", "watch", "", "secrets", ""},
	{"winready-system", "create", "", "configmaps", ""},
	{"winready-system", "get", "", "configmaps", "winready-originals"},
	{"", "list", "", "nodes", ""},
}

// checkMay and checkMayNot are the pod network check pods': watch their own
// plan (they are paired only once they serve), never the probe's key.
var checkMay = []access{
	{"winready-probe", "watch", "", "configmaps", ""},
	{"winready-probe", "create", "", "configmaps", ""},
	{"winready-probe", "update", "", "configmaps", "winready-podcheck-report-linux-0"},
}

var checkMayNot = []access{
	{"winready-probe", "get", "", "secrets", "winready-probe"},
	{"winready-probe", "get", "", "configmaps", "other"},
	{"winready-probe", "list", "", "configmaps", ""},
	{"winready-probe", "delete", "", "configmaps", "winready-podcheck-plan-linux-0"},
	{"", "list", "", "nodes", ""},
}

// boundRules are the RBAC rules config/default binds to the ServiceAccount
// (namespace/name), with the namespace each applies in ("" cluster-wide).
func boundRules(objs []*unstructured.Unstructured, sa string) map[string][]rbacv1.PolicyRule {
	roles := map[string][]rbacv1.PolicyRule{}
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ClusterRole", "Role":
			role := &rbacv1.Role{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, role)).To(Succeed())
			roles[obj.GetKind()+"/"+obj.GetNamespace()+"/"+obj.GetName()] = role.Rules
		}
	}
	bound := map[string][]rbacv1.PolicyRule{}
	for _, obj := range objs {
		if k := obj.GetKind(); k != "ClusterRoleBinding" && k != "RoleBinding" {
			continue
		}
		b := &rbacv1.RoleBinding{}
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, b)).To(Succeed())
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Namespace+"/"+s.Name == sa {
				roleNS := b.Namespace
				if b.RoleRef.Kind == "ClusterRole" {
					roleNS = ""
				}
				key := b.RoleRef.Kind + "/" + roleNS + "/" + b.RoleRef.Name
				Expect(roles).To(HaveKey(key), "binding %s/%s", b.Namespace, b.Name)
				bound[b.Namespace] = append(bound[b.Namespace], roles[key]...)
			}
		}
	}
	return bound
}

// covers says whether a request exercises the rule, bound in namespace ns
// ("" cluster-wide).
func covers(rule rbacv1.PolicyRule, ns string, a access) bool {
	if a.ns != ns {
		return false
	}
	names := rule.ResourceNames
	return containsAll([]string{a.group}, rule.APIGroups) && containsAll([]string{a.resource}, rule.Resources) &&
		containsAll([]string{a.verb}, rule.Verbs) && (len(names) == 0 || containsAll([]string{a.name}, names))
}

func containsAll(want, in []string) bool {
	for _, w := range want {
		found := false
		for _, i := range in {
			found = found || i == w
		}
		if !found {
			return false
		}
	}
	return true
}

// writeVerbs are the verbs that change objects.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "*"}

// reviews are created to be answered and never stored: a rule on them
// writes nothing.
var reviews = []string{"tokenreviews", "subjectaccessreviews"}

// writeRules counts the rules bound to sa that allow a write, by namespace;
// with anyName, only those that allow a write other than create to objects
// of any name (a create request carries no name).
func writeRules(objs []*unstructured.Unstructured, sa string, anyName bool) map[string]int {
	counts := map[string]int{}
	for ns, rules := range boundRules(objs, sa) {
		for _, r := range rules {
			if len(r.Resources) > 0 && containsAll(r.Resources, reviews) {
				continue
			}
			for _, v := range r.Verbs {
				if containsAll([]string{v}, writeVerbs) && (!anyName || v != "create" && len(r.ResourceNames) == 0) {
					counts[ns]++
					break
				}
			}
		}
	}
	return counts
}

// expectAccess checks each request with a SubjectAccessReview.
func expectAccess(user string, may, mayNot []access) {
	for _, a := range may {
		Expect(allowed(user, a.attrs())).To(BeTrue(), "%s may %+v", user, a)
	}
	for _, a := range mayNot {
		Expect(allowed(user, a.attrs())).To(BeFalse(), "%s may not %+v", user, a)
	}
}

// expectCovered checks that every rule bound to sa has a request in may.
func expectCovered(objs []*unstructured.Unstructured, sa string, may []access) {
	for ns, rules := range boundRules(objs, sa) {
		for _, rule := range rules {
			covered := false
			for _, a := range may {
				covered = covered || covers(rule, ns, a)
			}
			Expect(covered).To(BeTrue(), "rule %+v in namespace %q of %s has a request in the test", rule, ns, sa)
		}
	}
}

var _ = Describe("Least privilege", func() {
	It("grants the manager and the agents each rule with a request that needs it, and refuses its neighbours", func() {
		objs := installed
		expectAccess(managerSA, managerMay, managerMayNot)
		expectAccess(agentSA, agentMay, agentMayNot)
		expectAccess(checkSA, checkMay, checkMayNot)

		By("covering every rule of config/default with an allowed request")
		mgr, agent, check := "winready-system/winready-manager", "winready-probe/winready-probe", "winready-probe/winready-podcheck"
		expectCovered(objs, mgr, managerMay)
		expectCovered(objs, agent, agentMay)
		expectCovered(objs, check, checkMay)

		By("counting the rules that allow writes, as docs/security.md's table does")
		Expect(writeRules(objs, mgr, false)).To(Equal(map[string]int{
			"": 4, "calico-system": 1, "default": 1, "tigera-operator": 2, "winready-system": 5, "winready-probe": 7,
		}), "calico-system: the hold's annotation on calico-node, by name")
		Expect(writeRules(objs, mgr, true)).To(Equal(map[string]int{"default": 1, "winready-system": 1, "winready-probe": 1}),
			"events (the WindowsReadiness's, and leader election's on its Lease) are patched by generated names; reports are deleted as a collection")
		Expect(writeRules(objs, agent, false)).To(Equal(map[string]int{"winready-probe": 1}))
		Expect(writeRules(objs, agent, true)).To(Equal(map[string]int{"winready-probe": 1}),
			"reports are updated by node name, which admission checks")
		Expect(writeRules(objs, check, true)).To(Equal(map[string]int{"winready-probe": 1}))
	})

	It("pins the probe agents to the manager's image by digest when config/default is given a digest", func() {
		const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		// What `kustomize edit set image winready=...@sha256:...` writes into
		// config/default, in a copy of config/.
		dir := GinkgoT().TempDir()
		Expect(os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "config")))).To(Succeed())
		path := filepath.Join(dir, "default", "kustomization.yaml")
		k, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		pinned := strings.Replace(string(k), "- name: winready\n  newTag: dev\n",
			"- name: winready\n  newName: registry.example.com/winready\n  digest: "+digest+"\n", 1)
		Expect(pinned).NotTo(Equal(string(k)), "config/default names the image")
		Expect(os.WriteFile(path, []byte(pinned), 0o600)).To(Succeed())
		objs, err := installpkg.Build(filepath.Join(dir, "default"))
		Expect(err).NotTo(HaveOccurred())
		d := managerDeployment(objs)
		want := "registry.example.com/winready@" + digest
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(want))
		Expect(d.Spec.Template.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "WINREADY_IMAGE", Value: want}),
			"the probe agents get the digest too")

		By("admitting the probe only with the manager's digest")
		setManagerImage(want)
		DeferCleanup(setManagerImage, managerImage)
		Eventually(func() error { return createAsManager(probeDaemonSet(want)) }).Should(Succeed())
		Eventually(func() error { return createAsManager(probeDaemonSet("registry.example.com/winready:v0.1.0")) }).
			Should(MatchError(ContainSubstring("manager's own image")))
	})
})

// setManagerImage sets the installed manager Deployment's image, the
// parameter of the probe admission policy.
func setManagerImage(image string) {
	d := &appsv1.Deployment{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "winready-manager"}, d)).To(Succeed())
	d.Spec.Template.Spec.Containers[0].Image = image
	Expect(k8s.Update(ctx, d)).To(Succeed())
}
