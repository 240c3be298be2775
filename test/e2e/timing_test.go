package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/calicosim"
)

// pacedCluster is the seed's main cluster on n paced nodes: kwok makes their
// pods Ready one second after they are bound, so calico-node's rollout takes
// about a second per node, as the DaemonSet controller waits for each.
func pacedCluster(n int) calicosim.Cluster {
	cl := mainCluster()
	cl.Nodes = make([]calicosim.Node, n)
	for i := range cl.Nodes {
		cl.Nodes[i] = calicosim.Node{Name: fmt.Sprintf("%s%d", pacedPrefix, i),
			InternalIP: netip.AddrFrom4([4]byte{10, 0, 1, byte(10 + i)}).String()}
	}
	return cl
}

// The timing scenario: the manual runbook (hack/runbook.sh) and winready,
// one after the other on the same control plane and the same paced nodes,
// each from the seed's state. It prints both wall times and their ratio; it
// asserts what winready does to the nodes (one calico-node replacement each)
// and that both reach the same configuration, not the times, which a loaded
// machine moves. make e2e runs it at 3 nodes; make e2e-timing at 3 and 30.
var _ = Describe("The manual runbook and winready, timed on the same control plane", Label("timing"), Ordered, func() {
	BeforeAll(func() {
		if _, ok := calicoBackend.(*realBackend); !ok {
			Skip("the timing scenario runs against the real Tigera operator (make e2e); test/bench times the simulator")
		}
	})

	for _, n := range timingSizes() {
		It(fmt.Sprintf("migrates %d paced nodes with one calico-node replacement each, timed against the runbook", n), func() {
			timeBoth(n)
		})
	}
})

// timingSizes are the node counts the scenario runs at: E2E_TIMING_NODES
// (comma-separated), else 3, the reference cluster's size.
func timingSizes() []int {
	sizes := os.Getenv("E2E_TIMING_NODES")
	if sizes == "" {
		return []int{3}
	}
	var out []int
	for _, s := range splitComma(sizes) {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 || n > 200 {
			panic(fmt.Sprintf("E2E_TIMING_NODES: %q is not a node count from 1 to 200", s))
		}
		out = append(out, n)
	}
	return out
}

func timeBoth(n int) {
	b := calicoBackend.(*realBackend)
	cl := pacedCluster(n)
	Expect(b.Seed(ctx, k8s, cl)).To(Succeed())
	DeferCleanup(func() {
		var names []string
		for _, node := range cl.Nodes {
			names = append(names, node.Name)
		}
		Expect(removeNodes(ctx, k8s, names...)).To(Succeed())
	})
	Eventually(atRest).WithTimeout(10*time.Minute).Should(Succeed(), "calico-node on the paced nodes, rolled out")
	original := touchedFields()
	originalEnv := calicoNodeEndpoint()

	// The runbook writes what winready detects: kubeadm's controlPlaneEndpoint
	// and the API server's ServiceCIDR (the end asserts both wrote the same).
	host, port, err := net.SplitHostPort(cl.KubeadmConfig.ControlPlaneEndpoint)
	Expect(err).NotTo(HaveOccurred())
	cidrs := &networkingv1.ServiceCIDRList{}
	Expect(k8s.List(ctx, cidrs)).To(Succeed())
	Expect(cidrs.Items).NotTo(BeEmpty())
	Expect(cidrs.Items[0].Spec.CIDRs).NotTo(BeEmpty())

	By("running the manual runbook")
	replaced := replacements()
	start := time.Now()
	runbook := exec.Command("bash", filepath.Join(repoRoot, "hack", "runbook.sh"), host, port, cidrs.Items[0].Spec.CIDRs[0])
	runbook.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(b.logDir, "admin.kubeconfig"),
		"KUBECTL="+binPath("k8s", "1.37.2", "kubectl"), "RUNBOOK_TRACE=1")
	out, err := runbook.CombinedOutput()
	runbookWall := time.Since(start)
	Expect(os.WriteFile(filepath.Join(b.logDir, fmt.Sprintf("runbook-%d.log", n)), out, 0o600)).To(Succeed())
	Expect(err).NotTo(HaveOccurred(), "the runbook:\n%s", out)
	Eventually(replaced).Should(HaveLen(n), "every node's calico-node pod replaced")
	runbookReplaced := replaced()
	// Not timed: the runbook ends where winready's Ready does (TigeraStatus
	// calico-windows not Degraded, found or not), but calico-windows freezes
	// when Windows is turned off, so it must have settled before the undo.
	Eventually(healthy).Should(Succeed(), why)
	migrated := touchedFields()
	GinkgoWriter.Printf("timing %d nodes: runbook %s, calico-node pods replaced per node: %s\n",
		n, runbookWall.Round(100*time.Millisecond), perNode(runbookReplaced))

	By("putting the cluster back as the runbook found it")
	undoRunbook(b, original, originalEnv)

	By("running winready")
	replaced = replacements()
	mark := auditSize(b)
	start = time.Now()
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
		Spec: v1alpha1.WindowsReadinessSpec{Preflight: v1alpha1.PreflightSpec{SkipNetworkProbe: true},
			PodNetworkCheck: v1alpha1.PodNetworkCheckSpec{Disabled: true}}}
	Expect(k8s.Create(ctx, wr)).To(Succeed())
	DeferCleanup(leaveAsFound)
	Eventually(on.Phase).WithTimeout(10*time.Minute).WithPolling(50*time.Millisecond).Should(Equal(v1alpha1.PhaseReady), why)
	winreadyWall := time.Since(start)
	Eventually(replaced).Should(HaveLen(n), "every node's calico-node pod replaced")
	Consistently(replaced).Should(Equal(once(cl)), "each calico-node pod replaced once by winready")
	winreadyReplaced := replaced()
	Expect(touchedFields()).To(Equal(migrated), "winready and the runbook reach the same configuration")
	Eventually(healthy).Should(Succeed(), why)

	By("rolling back with winready")
	replaced = replacements()
	rollbackMark := auditSize(b)
	start = time.Now()
	on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
	Eventually(on.Phase).WithTimeout(10*time.Minute).WithPolling(50*time.Millisecond).Should(Equal(v1alpha1.PhaseRolledBack), why)
	rollbackWall := time.Since(start)
	Eventually(replaced).Should(HaveLen(n), "every node's calico-node pod replaced")
	Consistently(replaced).Should(Equal(once(cl)), "each calico-node pod replaced once by the rollback")
	Expect(touchedFields()).To(Equal(original))

	// Each direction on its own: the first change of each waits for the
	// spec, not for Calico.
	gaps := append(eventToWrite(readAudit(b, mark, rollbackMark)), eventToWrite(readAudit(b, rollbackMark, 0))...)
	var lines []string
	for _, g := range gaps {
		lines = append(lines, g.String())
	}
	Expect(os.WriteFile(filepath.Join(b.logDir, fmt.Sprintf("event-to-write-%d-%s.txt", n, start.Format("150405"))), []byte(strings.Join(lines, "\n")+"\n"), 0o600)).To(Succeed())
	delays := make([]time.Duration, len(gaps))
	for i, g := range gaps {
		delays[i] = g.Delay
	}
	ratio := winreadyWall.Seconds() / runbookWall.Seconds()
	GinkgoWriter.Printf("timing %d nodes: runbook %s (calico-node pods replaced per node: %s), winready %s (%s), winready/runbook %.2f; "+
		"winready rollback %s (%s); event->write over %d writes of the migration and rollback: p50 %s, p95 %s, max %s\n",
		n, runbookWall.Round(100*time.Millisecond), perNode(runbookReplaced), winreadyWall.Round(100*time.Millisecond), perNode(winreadyReplaced),
		ratio, rollbackWall.Round(100*time.Millisecond), perNode(replaced()), len(delays),
		percentile(delays, 50), percentile(delays, 95), percentile(delays, 100))
	AddReportEntry(fmt.Sprintf("timing %d nodes", n), map[string]any{"runbook": runbookWall.Seconds(), "winready": winreadyWall.Seconds(),
		"ratio": ratio, "rollback": rollbackWall.Seconds()})
}

// perNode summarises replacements per node: how many nodes had each count.
func perNode(m map[string]int) string {
	counts := map[int]int{}
	for _, c := range m {
		counts[c]++
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d on %d nodes", c, counts[c]))
	}
	return strings.Join(parts, ", ")
}

func once(cl calicosim.Cluster) map[string]int {
	m := map[string]int{}
	for _, n := range cl.Nodes {
		m[n.Name] = 1
	}
	return m
}

// calicoNodeEndpoint is the API server address calico-node runs with.
func calicoNodeEndpoint() [2]string {
	return [2]string{daemonSetEnv(calico.NodeDaemonSet, calico.ServiceHostKey), daemonSetEnv(calico.NodeDaemonSet, calico.ServicePortKey)}
}

// undoRunbook puts back what the runbook changed, as a person would: the
// forward patches reversed, the services-endpoint ConfigMap deleted, and
// the Tigera operator restarted, as it keeps the ConfigMap's address in
// memory until then; it returns once Calico is at rest as before.
func undoRunbook(b *realBackend, original touched, originalEnv [2]string) {
	inst := on.Installation()
	var ops []calico.PatchOp
	for i, enc := range original.Encapsulation {
		ops = append(ops, calico.PatchOp{Op: "replace", Path: fmt.Sprintf("/spec/calicoNetwork/ipPools/%d/encapsulation", i), Value: enc})
	}
	restore := func(path string, was any, present, wasPresent bool) {
		switch {
		case wasPresent:
			ops = append(ops, calico.PatchOp{Op: "add", Path: path, Value: was})
		case present:
			ops = append(ops, calico.PatchOp{Op: "remove", Path: path})
		}
	}
	restore("/spec/calicoNetwork/bgp", original.BGP, inst.Spec.CalicoNetwork.BGP != nil, original.BGP != nil)
	restore("/spec/calicoNetwork/windowsDataplane", original.WindowsDataplane,
		inst.Spec.CalicoNetwork.WindowsDataplane != nil, original.WindowsDataplane != nil)
	restore("/spec/serviceCIDRs", original.ServiceCIDRs, inst.Spec.ServiceCIDRs != nil, original.ServiceCIDRs != nil)
	// Validation refuses windowsNodes while Windows is off; the operator
	// wrote them, the seed had none.
	Expect(original.WindowsNodes).To(BeFalse())
	restore("/spec/windowsNodes", nil, inst.Spec.WindowsNodes != nil, false)
	patch, err := json.Marshal(ops)
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Patch(ctx, inst, client.RawPatch(types.JSONPatchType, patch))).To(Succeed())

	Expect(original.StrictAffinity).NotTo(BeNil())
	ipam := &calicov3.IPAMConfiguration{ObjectMeta: metav1.ObjectMeta{Name: calico.IPAMConfigName}}
	Expect(k8s.Patch(ctx, ipam, client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"strictAffinity":%t}}`, *original.StrictAffinity)))).To(Succeed())
	Expect(original.ServicesEndpoint).To(BeNil(), "the seed has no services-endpoint ConfigMap")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}}
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, cm))).To(Succeed())
	Expect(b.restartOperator()).To(Succeed())

	Eventually(touchedFields).Should(Equal(original))
	Eventually(calicoNodeEndpoint).WithTimeout(5*time.Minute).Should(Equal(originalEnv), "the restarted operator renders its pod's address")
	Eventually(atRest).WithTimeout(10*time.Minute).Should(Succeed(), why)
}
