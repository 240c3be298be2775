package e2e

import (
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/winready/winready/api/v1alpha1"
)

// kwokAnnotation marks the nodes kwok plays.
const kwokAnnotation = "kwok.x-k8s.io/node"

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// skipProbe: the probe agents need a real node network; kwok's nodes have
// none, and on the real backend only the canary scenario plays the agents in
// the test process (playRoundAgents).
func skipProbe() bool { return os.Getenv("E2E_BACKEND") == "real" }

// createPausedWR creates the WindowsReadiness paused: the preflight runs, no
// step changes the cluster.
func createPausedWR() {
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
		Spec: v1alpha1.WindowsReadinessSpec{Paused: true, Preflight: v1alpha1.PreflightSpec{SkipNetworkProbe: skipProbe()},
			// No pod runs on kwok nodes: the pod network check needs real pods.
			PodNetworkCheck: v1alpha1.PodNetworkCheckSpec{Disabled: skipProbe()}}}
	Expect(k8s.Create(ctx, wr)).To(Succeed())
}

// leaveAsFound rolls back what a scenario migrated (its Windows node removed
// first) and removes what it created, so that the next scenario starts from
// the seed: the real backend's Clean does not reset Calico, and the scenarios
// run in random order.
func leaveAsFound() {
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, windowsNode()))).To(Succeed())
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	if k8s.Get(ctx, client.ObjectKeyFromObject(wr), wr) == nil {
		// The manager writes the status meanwhile: retried on conflict.
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Direction, wr.Spec.Paused = v1alpha1.DirectionRollback, false
		})
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack), why)
	}
	deleteWR()
	Expect(calicoBackend.Clean(ctx, k8s)).To(Succeed())
}

// deleteWR deletes the WindowsReadiness and waits until it is gone.
func deleteWR() {
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, wr))).To(Succeed())
	Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(wr), wr)) }).Should(BeTrue())
}

func checkOf(name string) func() v1alpha1.PreflightCheck {
	return func() v1alpha1.PreflightCheck {
		if pf := on.WR().Status.Preflight; pf != nil {
			for _, c := range pf.Checks {
				if c.Name == name {
					return c
				}
			}
		}
		return v1alpha1.PreflightCheck{}
	}
}

// setPools makes the Installation's pools exactly pools.
func setPools(pools []operatorv1.IPPool) {
	Eventually(func() error {
		inst := on.Installation()
		inst.Spec.CalicoNetwork.IPPools = pools
		return k8s.Update(ctx, inst)
	}).Should(Succeed())
}

// withAPIServerKinds serves Calico's API as the aggregated Calico API server
// does, for the rest of the spec: projectcalico.org/v3 without ipamblocks,
// which stay crd.projectcalico.org/v1 IPAMBlocks.
func withAPIServerKinds() {
	v3 := &apiextensionsv1.CustomResourceDefinition{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "ipamblocks.projectcalico.org"}, v3)).To(Succeed())
	Expect(k8s.Delete(ctx, v3)).To(Succeed())
	Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(v3), v3)) }).Should(BeTrue())
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(repoRoot, "bin", "crds", "calico-v1")}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(envtest.UninstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds})).To(Succeed())
		v3.ResourceVersion, v3.UID, v3.Status = "", "", apiextensionsv1.CustomResourceDefinitionStatus{}
		Eventually(func() error { return client.IgnoreAlreadyExists(k8s.Create(ctx, v3)) }).Should(Succeed())
		Eventually(func() error { return k8s.List(ctx, &calicov3.IPAMBlockList{}) }).Should(Succeed(), "v3 IPAM blocks are served again")
	})
}

// borrowedBlock is a crd.projectcalico.org/v1 IPAMBlock affine to linux-0
// with one address used by a pod on linux-1.
func borrowedBlock() client.Object {
	block := &calicov3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "172-20-0-0-26"},
		Spec: calicov3.IPAMBlockSpec{CIDR: "172.20.0.0/26", Affinity: ptr.To("host:linux-0"),
			Allocations: append([]*int{ptr.To(0)}, make([]*int, 63)...), Unallocated: []int{},
			Attributes: []calicov3.AllocationAttribute{{HandleID: ptr.To("k8s-pod-network.x"),
				ActiveOwnerAttrs: map[string]string{"node": "linux-1", "namespace": "default", "pod": "web"}}}}}
	u, err := runtimeToUnstructured(block)
	Expect(err).NotTo(HaveOccurred())
	u.SetAPIVersion("crd.projectcalico.org/v1")
	u.SetKind("IPAMBlock")
	return u
}

func runtimeToUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
