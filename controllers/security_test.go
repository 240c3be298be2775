package controllers_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
	installpkg "github.com/winready/winready/test/install"
)

const (
	managerSA = "system:serviceaccount:winready-system:winready-manager"
	agentSA   = "system:serviceaccount:winready-probe:winready-probe"
	checkSA   = "system:serviceaccount:winready-probe:winready-podcheck"
)

// managerImage is the image config/default gives the manager; the operator
// under test runs its probe agents with it, as the manager in a pod does.
var managerImage string

// installConfig installs config/default but its CRD (envtest installs it),
// with the namespaces its Roles live in.
func installConfig() {
	for _, ns := range []string{"calico-system", "tigera-operator", "kube-public"} {
		ensureNamespace(ns)
	}
	objs := install()
	Expect(installpkg.Create(ctx, k8s, objs, func(u *unstructured.Unstructured) bool {
		return u.GetKind() != "CustomResourceDefinition"
	})).To(Succeed())
	managerImage = managerDeployment(objs).Spec.Template.Spec.Containers[0].Image

	// The API server takes the policies up a moment after they are created.
	other := probeDaemonSet(managerImage)
	other.Name = "other"
	Eventually(func() error { return createAsManager(other) }).Should(MatchError(ContainSubstring("only the probe")),
		"the probe DaemonSet policy is in force")
	unbound := tokenClient(authenticationv1.TokenRequestSpec{})
	Eventually(func() error { return unbound.Create(ctx, report("node-a", "node-a"), client.DryRunAll) }).
		Should(MatchError(ContainSubstring("the token of its pod")), "the report policy is in force")
}

func managerDeployment(objs []*unstructured.Unstructured) *appsv1.Deployment {
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" && obj.GetName() == "winready-manager" {
			d := &appsv1.Deployment{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d)).To(Succeed())
			return d
		}
	}
	Fail("config/default has no manager Deployment")
	return nil
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
		objs := install()
		expectAccess(managerSA, managerMay, managerMayNot)
		expectAccess(agentSA, agentMay, agentMayNot)
		expectAccess(checkSA, checkMay, checkMayNot)

		By("covering every rule of config/default with an allowed request")
		manager, agent, check := "winready-system/winready-manager", "winready-probe/winready-probe", "winready-probe/winready-podcheck"
		expectCovered(objs, manager, managerMay)
		expectCovered(objs, agent, agentMay)
		expectCovered(objs, check, checkMay)

		By("counting the rules that allow writes, as docs/security.md's table does")
		Expect(writeRules(objs, manager, false)).To(Equal(map[string]int{
			"": 4, "calico-system": 1, "default": 1, "tigera-operator": 2, "winready-system": 5, "winready-probe": 7,
		}), "calico-system: the hold's annotation on calico-node, by name")
		Expect(writeRules(objs, manager, true)).To(Equal(map[string]int{"default": 1, "winready-system": 1, "winready-probe": 1}),
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
		Expect(os.CopyFS(dir, os.DirFS(filepath.Join("..", "config")))).To(Succeed())
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
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "winready-manager"}, d)).To(Succeed())
	d.Spec.Template.Spec.Containers[0].Image = image
	Expect(k8s.Update(ctx, d)).To(Succeed())
}

var _ = Describe("Admission in the probe namespace", func() {
	It("admits only the probe DaemonSet, exactly as winready builds it", func() {
		Eventually(func() error { return createAsManager(probeDaemonSet(managerImage)) }).Should(Succeed(), "the real probe")
		rejected := map[string]func(*appsv1.DaemonSet){
			"mounts no volumes": func(ds *appsv1.DaemonSet) {
				pod := &ds.Spec.Template.Spec
				pod.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
				pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
			},
			"is privileged or may escalate": func(ds *appsv1.DaemonSet) {
				sc := ds.Spec.Template.Spec.Containers[0].SecurityContext
				sc.Privileged, sc.AllowPrivilegeEscalation = ptr.To(true), ptr.To(true)
			},
			"manager's own image": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Image = "registry.example.com/attacker:latest"
			},
			"adds only NET_RAW": func(ds *appsv1.DaemonSet) {
				caps := ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities
				caps.Add = append(caps.Add, "SYS_ADMIN")
			},
			"its fixed command": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "id"}
			},
			"read-only root filesystem": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
			},
			// A host-process container needs the host network, which only
			// the probe has.
			"no hostProcess": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].SecurityContext.WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}
			},
			"no other host namespace":              func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostPID = true },
			"only the probe uses the host network": func(ds *appsv1.DaemonSet) { ds.Name = "other" },
		}
		for why, change := range podTemplatePins {
			rejected[why] = change
		}
		for why, change := range rejected {
			ds := probeDaemonSet(managerImage)
			change(ds)
			Expect(createAsManager(ds)).To(MatchError(ContainSubstring(why)), why)
		}
		for why, change := range podTemplatePins {
			check := round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
			change(check)
			Expect(createAsManager(check)).To(MatchError(ContainSubstring(why)), "the pod network check: %s", why)
		}
		check := round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
		check.Spec.Template.Spec.Containers[0].Args = []string{"probe", "--namespace=" + probeNamespace}
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("the pod network check runs its fixed command")))
		// An unmasked /proc needs a user namespace, which the API server's
		// validation already refuses on the host network: only the pod
		// network check could ask for it.
		check = round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
		check.Spec.Template.Spec.HostUsers = ptr.To(false)
		check.Spec.Template.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("no procMount")))
		check = round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
		check.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "any"}}}}}}}}
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("no Secret in a projected volume")))

		By("leaving room for DaemonSets at the restricted level, such as the pod network check")
		check = round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
		Expect(createAsManager(check)).To(Succeed())
		check.Spec.Template.Spec.ServiceAccountName = probe.ServiceAccount
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("only the probe runs as the winready-probe ServiceAccount")))
		check = round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
		check.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_RAW"}
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("drop all capabilities")))
		check = round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
		check.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("run as non-root")))

		outside := probeDaemonSet(managerImage)
		outside.Namespace = operatorNamespace
		Expect(apierrors.IsForbidden(createAsManager(outside))).To(BeTrue(), "no DaemonSet outside the probe namespace")
	})
})

// podTemplatePins are changes to a pod template that no DaemonSet in the
// probe namespace may make, by the message that refuses each.
var podTemplatePins = map[string]func(*appsv1.DaemonSet){
	"seccomp RuntimeDefault": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	},
	"no AppArmor Unconfined": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	},
	"no SELinux options": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
	},
	"no lifecycle hooks": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "id"}}}}
	},
	"no probe reaches another host": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Path: "/latest/meta-data/", Port: intstr.FromInt32(80)}}}
	},
	"no priority class": func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.PriorityClassName = "system-node-critical" },
	"no runtime class":  func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.RuntimeClassName = ptr.To("unconfined") },
}

var _ = Describe("Services in the probe namespace", func() {
	It("admit only the pod network check's ClusterIP Service", func() {
		svc := func(change func(*corev1.Service)) *corev1.Service {
			s := podcheck.Service(probeNamespace, nil)
			change(s)
			return s
		}
		Eventually(func() error {
			return createAsManager(svc(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"8.8.8.8"} }))
		}).Should(MatchError(ContainSubstring("no external IPs")), "the policy is in force")
		Expect(createAsManager(svc(func(*corev1.Service) {}))).To(Succeed(), "the pod network check's Service")
		rejected := map[string]func(*corev1.Service){
			"type ClusterIP":  func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort },
			"type ClusterIP ": func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer },
			"no external IPs": func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"10.96.0.1"} },
			"only the Service winready-podcheck": func(s *corev1.Service) {
				s.Name = "other"
			},
			"selects only the pod network check's pods": func(s *corev1.Service) {
				s.Spec.Selector = map[string]string{"app.kubernetes.io/component": "probe", "app.kubernetes.io/name": "winready"}
			},
			"only its echo port": func(s *corev1.Service) {
				s.Spec.Ports[0].TargetPort = intstr.FromInt32(10250)
			},
			"only its echo port ": func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "kubelet", Port: 10250, Protocol: corev1.ProtocolTCP})
			},
		}
		for why, change := range rejected {
			Expect(createAsManager(svc(change))).To(MatchError(ContainSubstring(strings.TrimSpace(why))), why)
		}
	})
})

// probeDaemonSet is the probe DaemonSet the reconciler creates.
func probeDaemonSet(image string) *appsv1.DaemonSet {
	return round.DaemonSet(probe.RoundKind, probeNamespace, image, "r", nil)
}

// asUser is a client of the suite's API server as another identity.
func asUser(mutate func(*rest.Config)) client.WithWatch {
	c := rest.CopyConfig(cfg)
	mutate(c)
	cl, err := client.NewWithWatch(c, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// asManagerConfig impersonates the manager's ServiceAccount.
func asManagerConfig(c *rest.Config) {
	c.Impersonate = rest.ImpersonationConfig{UserName: managerSA, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:winready-system"}}
}

func asManager() client.Client { return asUser(asManagerConfig) }

// tokenClient is a client with the token of the agents' ServiceAccount that
// the request asks for.
func tokenClient(spec authenticationv1.TokenRequestSpec) client.WithWatch {
	return tokenClientFor(probe.ServiceAccount, spec)
}

// tokenClientFor is tokenClient for another ServiceAccount of the probe
// namespace.
func tokenClientFor(account string, spec authenticationv1.TokenRequestSpec) client.WithWatch {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: account}}
	spec.ExpirationSeconds = ptr.To[int64](3600)
	tr := &authenticationv1.TokenRequest{Spec: spec}
	Expect(k8s.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	return asUser(func(c *rest.Config) {
		c.CertData, c.KeyData, c.CertFile, c.KeyFile = nil, nil, "", ""
		c.BearerToken = tr.Status.Token
	})
}

// createAsManager creates obj in a dry run, as the manager's ServiceAccount.
func createAsManager(obj client.Object) error {
	return asManager().Create(ctx, obj, client.DryRunAll)
}

// agentOn is a client holding a token bound to a probe pod on node, as the
// agent running there holds; the pod is removed after the spec.
func agentOn(node string) client.WithWatch { return agentOnAs(probe.ServiceAccount, node) }

// agentOnAs is agentOn for the agents running as account: the pod is the
// one the DaemonSet controller makes of the probe's or the pod network
// check's DaemonSet, which the probe namespace's Pod policy admits.
func agentOnAs(account, node string) client.WithWatch {
	ds := probeDaemonSet(managerImage)
	if account == podcheck.ServiceAccount {
		ds = podCheckDaemonSet()
	}
	Expect(ds.Spec.Template.Spec.ServiceAccountName).To(Equal(account))
	pod := daemonSetPod(ds, node)
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
	})
	return tokenClientFor(account, authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	})
}

// report is node's probe report ConfigMap claiming to be from claimed.
func report(node, claimed string) *corev1.ConfigMap {
	cm, err := round.ReportObject(probe.RoundKind, probeNamespace, round.Report[probe.Result]{Round: "r", Node: claimed, Stage: round.Done,
		Result: probe.Result{Mode: probe.ModeCapture}})
	Expect(err).NotTo(HaveOccurred())
	cm.Name = probe.RoundKind.ReportName(node)
	return cm
}

var _ = Describe("Probe reports", func() {
	It("accept from an agent only its own node's report, never the plan", func() {
		for _, n := range []string{"node-a", "node-b"} {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{calico.OSLabel: "linux"}}}
			Expect(k8s.Create(ctx, node)).To(Succeed())
			DeferCleanup(deleteNode, n)
		}
		a := agentOn("node-a")
		plan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: probe.RoundKind.PlanName("node-a"),
			Labels: map[string]string{round.PlanLabel: "r", round.ComponentLabel: probe.RoundKind.Component}},
			Data: map[string]string{round.NodeKey: "node-a", round.PlanKey: `{"addr":"10.0.0.1"}`}}
		Expect(a.Create(ctx, plan, client.DryRunAll)).To(MatchError(ContainSubstring("writes only ConfigMap winready-probe-report-node-a")))
		Expect(k8s.Create(ctx, plan)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, plan)).To(Succeed()) })
		mine, err := round.Agent[probe.Params, probe.Result]{Client: a, Kind: probe.RoundKind, Namespace: probeNamespace, Node: "node-a"}.Plan(ctx, "r")
		Expect(err).NotTo(HaveOccurred(), "an agent reads its own plan")
		Expect(mine.Addr.String()).To(Equal("10.0.0.1"))
		plan.Data[round.PlanKey] = `{"addr":"10.0.0.2"}`
		Expect(a.Update(ctx, plan)).To(MatchError(ContainSubstring("writes only ConfigMap winready-probe-report-node-a")))
		forgedPlan := report("node-a", "node-a")
		forgedPlan.Labels[round.PlanLabel] = "r"
		Expect(a.Create(ctx, forgedPlan, client.DryRunAll)).To(MatchError(ContainSubstring("an agent writes no plan")),
			"its own report, labelled as a plan the manager would read")

		Expect(a.Create(ctx, report("node-b", "node-b"), client.DryRunAll)).To(MatchError(ContainSubstring("writes only ConfigMap")))
		Expect(a.Create(ctx, report("node-a", "node-b"), client.DryRunAll)).To(MatchError(ContainSubstring("reports only for its own node")))
		own := report("node-a", "node-a")
		Expect(a.Create(ctx, own)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, own)).To(Succeed()) })
		Expect(a.Update(ctx, own)).To(Succeed(), "an agent restarted within the round replaces its report")

		By("refusing a token bound to no pod")
		unbound := tokenClient(authenticationv1.TokenRequestSpec{})
		Expect(unbound.Create(ctx, report("node-a", "node-a"), client.DryRunAll)).To(MatchError(ContainSubstring("the token of its pod")))

		By("refusing a token bound to the node rather than to a pod on it")
		node := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "node-a"}, node)).To(Succeed())
		nodeBound := tokenClient(authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID},
		})
		Expect(nodeBound.Create(ctx, report("node-a", "node-a"), client.DryRunAll)).To(MatchError(ContainSubstring("the token of its pod")))

		By("holding each agent to its own kind's report")
		unlabelled := report("node-a", "node-a")
		delete(unlabelled.Labels, round.ComponentLabel)
		Expect(a.Create(ctx, unlabelled, client.DryRunAll)).To(MatchError(ContainSubstring("its own kind's report")))
		check := agentOnAs(podcheck.ServiceAccount, "node-a")
		forged := report("node-a", "node-a")
		forged.Name = podcheck.RoundKind.ReportName("node-a")
		Expect(check.Create(ctx, forged, client.DryRunAll)).To(MatchError(ContainSubstring("its own kind's report")),
			"a pod network check token writes no report the probe round counts")
		ownReport, err := round.ReportObject(podcheck.RoundKind, probeNamespace, round.Report[podcheck.Result]{Round: "r", Node: "node-a", Stage: round.Serving})
		Expect(err).NotTo(HaveOccurred())
		Expect(check.Create(ctx, ownReport, client.DryRunAll)).To(Succeed(), "its own report")
		Expect(check.Get(ctx, client.ObjectKey{Namespace: probeNamespace, Name: probe.RoundKind.Name}, &corev1.Secret{})).
			To(MatchError(ContainSubstring("forbidden")), "the probe's key is not the pod network check's")
	})

})

var _ = Describe("winready with least privilege", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	It("migrates as the manager's ServiceAccount, with a probe round the agents write with their own tokens", func() {
		seed(calicosim.MainCluster())
		writers := map[string]client.Client{}
		for _, n := range []string{"linux-0", "linux-1", "linux-2"} {
			writers[n] = agentOn(n)
		}
		var mu sync.Mutex
		wrote := map[string]bool{}
		agents.WriteAs(func(node string) client.Client {
			mu.Lock()
			defer mu.Unlock()
			wrote[node] = true
			return writers[node]
		})
		asSA := rest.CopyConfig(cfg)
		asManagerConfig(asSA)
		op = startOperatorWith(operatorOptions{restCfg: asSA})
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		probe := on.WR().Status.Preflight.Probe
		Expect(probe.Nodes).To(BeEquivalentTo(3))
		Expect(probe.MissingReports).To(BeZero(), "each agent's report was admitted")
		Expect(probe.PassedPairs).To(BeEquivalentTo(6))
		mu.Lock()
		Expect(wrote).To(HaveLen(3), "every report went through its agent's token")
		mu.Unlock()

		By("rolling back under the same identity, within the fields winready owns")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(on.ServicesEndpoint()).To(BeNil(), "the ConfigMap winready created is deleted again")
		Expect(on.IPAMConfig().Spec.StrictAffinity).To(BeFalse())
	})
})

// managerPatch sends a dry-run patch as the manager's ServiceAccount.
// managerPatch patches obj in a dry run as the manager's ServiceAccount does,
// under winready's field manager.
func managerPatch(obj client.Object, pt types.PatchType, data string) error {
	return asManager().Patch(ctx, obj, client.RawPatch(pt, []byte(data)), client.DryRunAll, client.FieldOwner(controllers.FieldOwner))
}

var _ = Describe("The manager's writes to Calico's objects", func() {
	AfterEach(func() { resetCluster(nil) })

	It("are held to the fields winready owns", func() {
		seed(calicosim.MainCluster())
		// A migration under way, at 10%: with none, the manager writes
		// nothing here.
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromString("10%")) })
		inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName}}
		refusedInst := map[string]string{
			"registry":        `[{"op":"add","path":"/spec/registry","value":"attacker.example.com/"}]`,
			"imagePath":       `[{"op":"add","path":"/spec/imagePath","value":"attacker"}]`,
			"a component":     `[{"op":"add","path":"/spec/calicoNodeDaemonSet","value":{"spec":{"template":{"spec":{"containers":[{"name":"calico-node","resources":{}}]}}}}}]`,
			"calicoNetwork":   `[{"op":"add","path":"/spec/calicoNetwork/linuxDataplane","value":"BPF"}]`,
			"a pool's fields": `[{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/natOutgoing","value":"Disabled"}]`,
			"a new pool":      `[{"op":"add","path":"/spec/calicoNetwork/ipPools/-","value":{"cidr":"10.244.0.0/16","encapsulation":"VXLAN"}}]`,
			"labels":          `[{"op":"add","path":"/metadata/labels","value":{"example.com/x":"y"}}]`,
			"an annotation":   `[{"op":"add","path":"/metadata/annotations","value":{"example.com/x":"y"}}]`,
		}
		Eventually(func() error {
			return managerPatch(inst, types.JSONPatchType, refusedInst["registry"])
		}).Should(MatchError(ContainSubstring("winready changes only calicoNetwork")), "the policy is in force")
		for what, patch := range refusedInst {
			Expect(managerPatch(inst, types.JSONPatchType, patch)).To(MatchError(ContainSubstring("winready")), what)
			Expect(k8s.Patch(ctx, inst, client.RawPatch(types.JSONPatchType, []byte(patch)), client.DryRunAll)).
				To(Succeed(), "others are not held to it: %s", what)
		}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		claim := calico.ClaimOps(inst.Labels)
		claimJSON, err := json.Marshal(claim)
		Expect(err).NotTo(HaveOccurred())
		Expect(managerPatch(inst, types.JSONPatchType, `[
			{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)).
			To(MatchError(ContainSubstring("only with its claim")), "unclaimed")
		Expect(managerPatch(inst, types.JSONPatchType, `[`+strings.Trim(string(claimJSON), "[]")+`,
			{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLAN"},
			{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"},
			{"op":"add","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"},
			{"op":"add","path":"/spec/serviceCIDRs","value":["10.96.0.0/12"]},
			{"op":"add","path":"/spec/nodeUpdateStrategy","value":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"10%"}}}]`)).
			To(Succeed(), "the fields winready owns")
		Expect(managerPatch(inst, types.MergePatchType, `{"metadata":{"labels":{"`+calico.ClaimLabel+`":"true"},"annotations":{"`+
			calico.HoldAnnotation+`":"2026-12-03T12:00:00Z"}}}`)).
			To(Succeed(), "the mark of the calico-node hold")
		Expect(managerPatch(inst, types.MergePatchType, `{"metadata":{"annotations":{"`+calico.HoldAnnotation+`":null}}}`)).
			To(Succeed(), "the mark of the calico-node hold, removed")

		By("the services endpoint ConfigMap: its two keys only")
		endpoint := func(name string, data map[string]string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: calico.OperatorNamespace, Name: name,
				Labels: map[string]string{calico.ClaimLabel: "true"}}, Data: data}
		}
		Expect(createAsManager(endpoint(calico.ServicesEndpointConfigMap, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10",
			"KUBERNETES_SERVICE_PORT": "6443"}))).To(Succeed())
		Expect(createAsManager(endpoint(calico.ServicesEndpointConfigMap, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10",
			"OTHER": "x"}))).To(MatchError(ContainSubstring("writes only KUBERNETES_SERVICE_HOST")))
		Expect(createAsManager(endpoint("other", map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10"}))).
			To(MatchError(ContainSubstring("writes only the ConfigMap kubernetes-services-endpoint")))
		kept := endpoint(calico.ServicesEndpointConfigMap, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10", "OTHER": "people's"})
		Expect(k8s.Create(ctx, kept)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, kept))).To(Succeed()) })
		Expect(managerPatch(kept, types.MergePatchType, `{"data":{"KUBERNETES_SERVICE_PORT":"6443"}}`)).To(Succeed())
		Expect(managerPatch(kept, types.MergePatchType, `{"data":{"OTHER":"attacker's"}}`)).
			To(MatchError(ContainSubstring("writes only KUBERNETES_SERVICE_HOST")))
		Expect(asManager().Delete(ctx, kept, client.DryRunAll)).To(MatchError(ContainSubstring("holds nothing else")))

		By("IPAMConfiguration default: strictAffinity only")
		ipam := &calicov3.IPAMConfiguration{ObjectMeta: metav1.ObjectMeta{Name: calico.IPAMConfigName}}
		Expect(managerPatch(ipam, types.MergePatchType, `{"spec":{"strictAffinity":true}}`)).To(Succeed())
		Expect(managerPatch(ipam, types.MergePatchType, `{"spec":{"maxBlocksPerHost":1}}`)).
			To(MatchError(ContainSubstring("only strictAffinity")))
		Expect(managerPatch(ipam, types.MergePatchType, `{"spec":{"autoAllocateBlocks":false}}`)).
			To(MatchError(ContainSubstring("only strictAffinity")))
	})
})
