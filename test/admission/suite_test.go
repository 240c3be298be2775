// Package admission_test is winready's admission suite: the policies of
// config/admission, the RBAC of config/rbac (least privilege, rule by rule)
// and the probe namespace's NetworkPolicies on a bare control plane (no
// simulator, no manager), each write sent in a dry run as the identity that
// would make it. A door is a write a stolen manager token would try: it must
// be refused for the manager's identity, by the policy the API server names,
// and admitted for an admin, so that the policies bound the manager and
// nobody else.
package admission_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/calico"
	installpkg "github.com/winready/winready/test/install"
	"github.com/winready/winready/test/kit"
)

const (
	managerSA = "system:serviceaccount:winready-system:winready-manager"
	systemNS  = "winready-system"
)

var (
	ctx     = context.Background()
	testEnv *kit.Env
	cfg     *rest.Config
	scheme  *runtime.Scheme
	// k8s is an admin: the Tigera operator, people and GitOps write as
	// identities the manager's policies never evaluate.
	k8s client.Client
	// manager holds the manager's identity, as a stolen token would.
	manager client.Client
	// installed is config/default as kustomize builds it.
	installed []*unstructured.Unstructured
	// managerImage is the image config/default gives the manager, the
	// parameter of the probe DaemonSet's policy.
	managerImage string
)

func TestAdmission(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// A policy's parameter reaches the API server through an informer: a
	// verdict that follows a change of the WindowsReadiness or of the
	// Installation may take a moment.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	var err error
	testEnv, err = kit.Environment(kit.Options{CalicoCRDs: filepath.Join("..", "..", "bin", "crds")})
	Expect(err).NotTo(HaveOccurred())
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	scheme, err = controllers.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	// winready writes under its own field manager; so does a careful thief.
	manager = client.WithFieldOwner(as(managerSA, "system:serviceaccounts", "system:serviceaccounts:"+systemNS), "winready")

	// config/default as users install it, but its CRD (the environment's):
	// namespaces, RBAC, the quotas and every admission policy.
	for _, ns := range []string{"calico-system", "tigera-operator", "kube-public"} {
		err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
	installed, err = installpkg.Build(filepath.Join("..", "..", "config", "default"))
	Expect(err).NotTo(HaveOccurred())
	Expect(installpkg.Create(ctx, k8s, installed, func(u *unstructured.Unstructured) bool {
		return u.GetKind() != "CustomResourceDefinition"
	})).To(Succeed())
	managerImage = managerDeployment(installed).Spec.Template.Spec.Containers[0].Image
	// The API server takes the policies up a moment after they are created.
	Eventually(func() error {
		return manager.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "other"}}, client.DryRunAll)
	}).Should(MatchError(ContainSubstring("winready-manager-system")), "the policies are in force")
	other := probeDaemonSet(managerImage)
	other.Name = "other"
	Eventually(func() error { return createAsManager(other) }).Should(MatchError(ContainSubstring("only the probe")),
		"the probe DaemonSet policy is in force")
	unbound := tokenClient(authenticationv1.TokenRequestSpec{})
	Eventually(func() error { return unbound.Create(ctx, report("node-a", "node-a"), client.DryRunAll) }).
		Should(MatchError(ContainSubstring("the token of its pod")), "the report policy is in force")
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// as is a client of the API server under another identity.
func as(user string, groups ...string) client.Client {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// setWR makes WindowsReadiness default hold a new object's spec, changed by
// each mutate; its status stays as it was.
func setWR(mutate ...func(*v1alpha1.WindowsReadiness)) {
	wr := &v1alpha1.WindowsReadiness{}
	err := k8s.Get(ctx, client.ObjectKey{Name: "default"}, wr)
	if apierrors.IsNotFound(err) {
		wr = &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		for _, m := range mutate {
			m(wr)
		}
		Expect(k8s.Create(ctx, wr)).To(Succeed())
		return
	}
	Expect(err).NotTo(HaveOccurred())
	fresh := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	for _, m := range mutate {
		m(fresh)
	}
	// The API server defaults what the new spec leaves out, as on a create.
	wr.Spec = fresh.Spec
	wr.Finalizers = nil
	Expect(k8s.Update(ctx, wr)).To(Succeed())
}

// noWR deletes WindowsReadiness default, as winready lets it go: the claims
// on what a spec wrote for real lifted first (a write to a claimed object
// needs the WindowsReadiness), then its finalizers.
func noWR() {
	Expect(kit.ForgetWindowsReadiness(ctx, k8s, systemNS)).To(Succeed())
}

// forgeStatus writes WindowsReadiness default's status as the manager's token
// may: its status subresource is the manager's to patch.
func forgeStatus(phase v1alpha1.Phase) {
	wr := &v1alpha1.WindowsReadiness{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "default"}, wr)).To(Succeed())
	patch := client.MergeFrom(wr.DeepCopy())
	wr.Status.Phase = phase
	Expect(manager.Status().Patch(ctx, wr, patch)).To(Succeed(), "the manager writes its status")
}

// refusedBy matches the error of a write a policy refused, the policy named.
// A name ending in * is a prefix: where two policies refuse the same write,
// the API server names one of them.
func refusedBy(policy string) OmegaMatcher {
	if prefix, ok := strings.CutSuffix(policy, "*"); ok {
		return MatchError(ContainSubstring("ValidatingAdmissionPolicy '" + prefix))
	}
	return MatchError(ContainSubstring("ValidatingAdmissionPolicy '" + policy + "'"))
}

// unclaimAll lifts winready's claim from every object that may carry it, as
// an admin, while WindowsReadiness default exists.
func unclaimAll() {
	Expect(kit.LiftClaims(ctx, k8s, systemNS)).To(Succeed())
}

// claimed puts winready's claim on obj, as every write of the manager's
// does.
func claimed[T client.Object](obj T) T {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[calico.ClaimLabel] = "true"
	obj.SetLabels(labels)
	return obj
}
