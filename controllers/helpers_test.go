package controllers_test

import (
	"time"

	"context"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/test/calicosim"
)

var ctx = context.Background()

// createWR creates the WindowsReadiness "default" with the given changes.
func createWR(mutate ...func(*v1alpha1.WindowsReadiness)) {
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	for _, m := range mutate {
		m(wr)
	}
	Expect(k8s.Create(ctx, wr)).To(Succeed())
}

// updateWR changes the spec of the WindowsReadiness, retrying on conflicts.
func updateWR(mutate func(*v1alpha1.WindowsReadiness)) {
	Eventually(func() error {
		wr := getWR()
		mutate(wr)
		return k8s.Update(ctx, wr)
	}).Should(Succeed())
}

// poke changes an annotation of the WindowsReadiness, which wakes the
// reconciler without changing the spec (a patch: an update would rewrite
// the defaulted durations in Go's form and bump the generation).
func poke(key, value string) {
	wr := getWR()
	base := wr.DeepCopy()
	if wr.Annotations == nil {
		wr.Annotations = map[string]string{}
	}
	wr.Annotations[key] = value
	Expect(k8s.Patch(ctx, wr, client.MergeFrom(base))).To(Succeed())
}

func getWR() *v1alpha1.WindowsReadiness {
	wr := &v1alpha1.WindowsReadiness{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr)).To(Succeed())
	return wr
}

// deleteWR deletes the WindowsReadiness and waits until it is gone.
func deleteWR() {
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, wr))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(wr), wr))
	}).Should(BeTrue(), "the WindowsReadiness is deleted")
}

// condition returns a condition of the WindowsReadiness, or an empty one.
func condition(typ string) func() metav1.Condition {
	return func() metav1.Condition {
		if c := meta.FindStatusCondition(getWR().Status.Conditions, typ); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
}

func phaseOf() v1alpha1.Phase { return getWR().Status.Phase }

func stepOf(name v1alpha1.StepName) func() v1alpha1.StepStatus {
	return func() v1alpha1.StepStatus {
		for _, s := range getWR().Status.Steps {
			if s.Name == name {
				return s
			}
		}
		return v1alpha1.StepStatus{}
	}
}

func installation() *operatorv1.Installation {
	inst := &operatorv1.Installation{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: calico.InstallationName}, inst)).To(Succeed())
	return inst
}

func ipamConfig() *calicov3.IPAMConfiguration {
	cfg := &calicov3.IPAMConfiguration{}
	err := k8s.Get(ctx, client.ObjectKey{Name: calico.IPAMConfigName}, cfg)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return cfg
}

func servicesEndpoint() *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return cm
}

func ipPool(name string) *calicov3.IPPool {
	pool := &calicov3.IPPool{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, pool)).To(Succeed())
	return pool
}

// serviceCIDRsOfCluster is what the API server itself says the service
// network is: the ServiceCIDR objects.
func serviceCIDRsOfCluster() []string {
	list := &networkingv1.ServiceCIDRList{}
	Expect(k8s.List(ctx, list)).To(Succeed())
	var cidrs []string
	for _, sc := range list.Items {
		cidrs = append(cidrs, sc.Spec.CIDRs...)
	}
	return cidrs
}

func haveStatus(status metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return And(HaveField("Status", status), HaveField("Reason", reason))
}

func mustParse(s string) time.Duration {
	d, err := time.ParseDuration(s)
	Expect(err).NotTo(HaveOccurred())
	return d
}

// seed seeds a cluster and waits until the simulated Calico is at rest.
func seed(cl calicosim.Cluster) {
	Expect(calicosim.Seed(ctx, k8s, cl)).To(Succeed())
	Expect(calicosim.WaitSettled(ctx, k8s, 30*time.Second)).To(Succeed(), "the simulated Calico is healthy before the test starts")
}

// resetCluster stops the operator, removes the WindowsReadiness, a test's
// Windows node and everything seeded, and resets the simulator, so that each
// spec leaves the cluster as it found it.
func resetCluster(op *operator) {
	if op != nil {
		op.stop()
	}
	deleteNode("win-1")
	deleteWR()
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: operatorNamespace, Name: record.Name}}))).To(Succeed())
	sim.ClearFault()
	sim.ReleaseRollouts()
	agents.Reset()
	// A probe round or pod network check round the spec left running goes
	// with it: the stopped operator no longer removes them, and envtest has
	// no garbage collector to follow their owner references.
	Expect((&probe.Engine{Kind: probe.RoundKind, Client: k8s, Namespace: probeNamespace}).Cleanup(ctx)).To(Succeed())
	Expect((&podcheck.Engine{Kind: podcheck.RoundKind, Client: k8s, Namespace: probeNamespace}).Cleanup(ctx)).To(Succeed())
	Expect(calicosim.Clean(ctx, k8s)).To(Succeed())
}

// probeAgentsName names the probe agents' DaemonSet.
var probeAgentsName = probe.RoundKind.Name

func deleteNode(name string) {
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
}

// createOrReplace creates obj, or replaces the spec of an object of that name
// (such as the FelixConfiguration the Tigera operator writes).
func createOrReplace(obj client.Object) error {
	err := k8s.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	current := obj.DeepCopyObject().(client.Object)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	return k8s.Update(ctx, obj)
}
