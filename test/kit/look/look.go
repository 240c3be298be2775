// Package look is test/kit's reads and writes of winready's objects for
// Gomega: each fails the spec on an error, and those that return a func
// fit Eventually and Consistently.
//
//	on := look.On(ctx, k8sClient)
//	on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = true })
//	Eventually(on.Phase).Should(Equal(v1alpha1.PhasePlanned))
//	Expect(on.Check("CalicoVersion")()).To(HaveField("Result", v1alpha1.CheckPass))
//
// winready's controllers, pass-by-pass and end-to-end suites and the plugin's
// tests use it; a platform team's suite on test/kit may too.
package look

import (
	"context"
	"strings"

	"github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/kit"
)

// Cluster reads and writes one cluster's objects for a spec.
type Cluster struct {
	g      gomega.Gomega
	ctx    context.Context
	client client.Client
}

// On reads and writes with c, failing through Gomega's global fail handler
// (Ginkgo's); With takes a Gomega of its own (gomega.NewWithT(t)).
func On(ctx context.Context, c client.Client) Cluster {
	return With(ctx, gomega.Default, c)
}

// With is On with g as the Gomega that fails.
func With(ctx context.Context, g gomega.Gomega, c client.Client) Cluster {
	return Cluster{g: g, ctx: ctx, client: c}
}

// Client is the client it reads and writes with.
func (c Cluster) Client() client.Client { return c.client }

// WR reads the WindowsReadiness "default".
func (c Cluster) WR() *v1alpha1.WindowsReadiness {
	wr, err := kit.GetWindowsReadiness(c.ctx, c.client)
	c.g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return wr
}

// CreateWR creates the WindowsReadiness "default", changed by mutate.
func (c Cluster) CreateWR(mutate ...func(*v1alpha1.WindowsReadiness)) {
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	for _, m := range mutate {
		m(wr)
	}
	c.g.ExpectWithOffset(1, c.client.Create(c.ctx, wr)).To(gomega.Succeed())
}

// UpdateWR changes the WindowsReadiness, retrying on conflicts.
func (c Cluster) UpdateWR(mutate func(*v1alpha1.WindowsReadiness)) {
	c.g.ExpectWithOffset(1, kit.UpdateWindowsReadiness(c.ctx, c.client, mutate)).To(gomega.Succeed())
}

// LiftGate switches both halves of the Windows join gate off.
func (c Cluster) LiftGate() {
	c.g.ExpectWithOffset(1, kit.LiftWindowsNodeGate(c.ctx, c.client)).To(gomega.Succeed())
}

// DeleteWR deletes the WindowsReadiness and waits until it is gone (its
// finalizer, when winready holds one, removed).
func (c Cluster) DeleteWR() {
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	c.g.ExpectWithOffset(1, client.IgnoreNotFound(c.client.Delete(c.ctx, wr))).To(gomega.Succeed())
	c.g.EventuallyWithOffset(1, func() bool {
		return apierrors.IsNotFound(c.client.Get(c.ctx, client.ObjectKeyFromObject(wr), wr))
	}).Should(gomega.BeTrue(), "the WindowsReadiness is deleted")
}

// Phase is the status's phase.
func (c Cluster) Phase() v1alpha1.Phase { return c.WR().Status.Phase }

// Message is the status's message.
func (c Cluster) Message() string { return c.WR().Status.Message }

// Condition reads a condition of the status (an empty one when absent).
func (c Cluster) Condition(typ string) func() metav1.Condition {
	return func() metav1.Condition { return kit.Condition(c.WR(), typ) }
}

// Step reads a step of the status (an empty one when absent).
func (c Cluster) Step(name v1alpha1.StepName) func() v1alpha1.StepStatus {
	return func() v1alpha1.StepStatus { return kit.Step(c.WR(), name) }
}

// Check reads a preflight check of the status (an empty one when absent).
func (c Cluster) Check(name string) func() v1alpha1.PreflightCheck {
	return func() v1alpha1.PreflightCheck { return kit.Check(c.WR(), name) }
}

// Installation reads the Installation "default".
func (c Cluster) Installation() *operatorv1.Installation {
	inst, err := kit.GetInstallation(c.ctx, c.client)
	c.g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return inst
}

// IPAMConfig reads the IPAMConfiguration "default"; nil when there is none.
func (c Cluster) IPAMConfig() *calicov3.IPAMConfiguration {
	cfg, err := kit.GetIPAMConfig(c.ctx, c.client)
	c.g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return cfg
}

// ServicesEndpoint reads the kubernetes-services-endpoint ConfigMap; nil
// when there is none.
func (c Cluster) ServicesEndpoint() *corev1.ConfigMap {
	cm, err := kit.GetServicesEndpoint(c.ctx, c.client)
	c.g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return cm
}

// IPPool reads a projectcalico.org/v3 IPPool.
func (c Cluster) IPPool(name string) *calicov3.IPPool {
	pool := &calicov3.IPPool{}
	c.g.ExpectWithOffset(1, c.client.Get(c.ctx, client.ObjectKey{Name: name}, pool)).To(gomega.Succeed())
	return pool
}

// ServiceCIDRs is what the API server itself says the service network is:
// the CIDRs of the ServiceCIDR objects.
func (c Cluster) ServiceCIDRs() []string {
	list := &networkingv1.ServiceCIDRList{}
	c.g.ExpectWithOffset(1, c.client.List(c.ctx, list)).To(gomega.Succeed())
	var cidrs []string
	for _, sc := range list.Items {
		cidrs = append(cidrs, sc.Spec.CIDRs...)
	}
	return cidrs
}

// HaveStatus matches a condition of that status and reason.
func HaveStatus(status metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return gomega.And(gomega.HaveField("Status", status), gomega.HaveField("Reason", reason))
}

// KStatus is what Flux's and Argo CD's kstatus library make of the
// WindowsReadiness.
func (c Cluster) KStatus() status.Status {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.WR())
	c.g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	c.g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return res.Status
}

// CalicoWrites keeps, of counts of writes by "<Kind> [<namespace>] <verb>"
// (metrics.WriteCounter's Snapshot), those to what Calico reads: the
// Installation, the IPAM configuration and the objects of tigera-operator
// and calico-system; not the gate nor the probe rounds in winready's own
// namespaces.
func CalicoWrites(counts map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range counts {
		f := strings.Fields(k)
		switch {
		case f[0] == "Installation", f[0] == "installations", f[0] == "IPAMConfiguration", f[0] == "ipamconfigurations",
			len(f) == 3 && (f[1] == "tigera-operator" || f[1] == "calico-system"):
			out[k] = v
		}
	}
	return out
}

// Touched is every field a migration may change, as a comparable value: a
// rollback must bring back exactly what Touched read before the migration.
type Touched struct {
	Pools            []operatorv1.IPPool
	BGP              *operatorv1.BGPOption
	WindowsDataplane *operatorv1.WindowsDataplaneOption
	WindowsNodes     *operatorv1.WindowsNodeSpec
	ServiceCIDRs     []string
	IPAM             *calicov3.IPAMConfigurationSpec
	ServicesEndpoint map[string]string
	// NodeEnv is the API server address calico-node runs with.
	NodeEnv [2]string
}

// Touched reads every field a migration may change.
func (c Cluster) Touched() Touched {
	inst := c.Installation()
	t := Touched{
		Pools:            inst.Spec.CalicoNetwork.IPPools,
		BGP:              inst.Spec.CalicoNetwork.BGP,
		WindowsDataplane: inst.Spec.CalicoNetwork.WindowsDataplane,
		WindowsNodes:     inst.Spec.WindowsNodes,
		ServiceCIDRs:     inst.Spec.ServiceCIDRs,
	}
	if cfg := c.IPAMConfig(); cfg != nil {
		t.IPAM = &cfg.Spec
	}
	if cm := c.ServicesEndpoint(); cm != nil {
		t.ServicesEndpoint = cm.Data
	}
	ds := &appsv1.DaemonSet{}
	c.g.ExpectWithOffset(1, c.client.Get(c.ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}, ds)).
		To(gomega.Succeed())
	t.NodeEnv[0], _ = calico.ContainerEnv(ds, calico.NodeContainer, calico.ServiceHostKey)
	t.NodeEnv[1], _ = calico.ContainerEnv(ds, calico.NodeContainer, calico.ServicePortKey)
	return t
}

// WindowsNode is a Node labelled kubernetes.io/os: windows.
func WindowsNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{calico.OSLabel: calico.OSWindows}}}
}

// CreateOrReplace creates obj, or replaces the spec of the object of that
// name (such as the FelixConfiguration the Tigera operator writes).
func (c Cluster) CreateOrReplace(obj client.Object) error {
	err := c.client.Create(c.ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	current := obj.DeepCopyObject().(client.Object)
	if err := c.client.Get(c.ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	return c.client.Update(c.ctx, obj)
}
