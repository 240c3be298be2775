package controllers_test

import (
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
	installpkg "github.com/winready/winready/test/install"
	"github.com/winready/winready/test/probens"
)

const managerSA = "system:serviceaccount:winready-system:winready-manager"

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
	unbound, err := probens.TokenClient(ctx, k8s, cfg, probeNamespace, probe.ServiceAccount, authenticationv1.TokenRequestSpec{})
	Expect(err).NotTo(HaveOccurred())
	report, err := probens.Report(probeNamespace, "node-a", "node-a")
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error { return unbound.Create(ctx, report.DeepCopy(), client.DryRunAll) }).
		Should(MatchError(ContainSubstring("the token of its pod")), "the report policy is in force")
}

func managerDeployment(objs []*unstructured.Unstructured) *appsv1.Deployment {
	d, err := installpkg.ManagerDeployment(objs)
	Expect(err).NotTo(HaveOccurred(), "config/default")
	return d
}

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

// createAsManager creates obj in a dry run, as the manager's ServiceAccount.
func createAsManager(obj client.Object) error {
	return asUser(asManagerConfig).Create(ctx, obj, client.DryRunAll)
}

// agentOn is a client holding a token bound to a probe pod on node, as the
// agent running there holds; the pod is removed after the spec.
func agentOn(node string) client.WithWatch {
	c, pod, err := probens.Agent(ctx, k8s, cfg, probeDaemonSet(managerImage), node)
	if pod != nil {
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
		})
	}
	Expect(err).NotTo(HaveOccurred())
	return c
}

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
