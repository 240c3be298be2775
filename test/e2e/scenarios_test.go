package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/contention"
)

// untestedCalico labels the spec that hack/e2e-matrix.sh runs, alone, against
// an operator older than the oldest tested one: its preflight refusal.
const untestedCalico = "untested-calico"

// mainCluster is the seed's main cluster, with kubeadm's record of the API
// server pointing at this control plane, so that calico-node (and the Tigera
// operator, which reads the same ConfigMap) can really use the address that
// winready detects.
func mainCluster() calicosim.Cluster {
	cl := calicosim.MainCluster()
	u, err := url.Parse(cfg.Host)
	Expect(err).NotTo(HaveOccurred())
	host, port, err := net.SplitHostPort(u.Host)
	Expect(err).NotTo(HaveOccurred())
	cl.KubeadmConfig.ControlPlaneEndpoint = net.JoinHostPort(host, port)
	return cl
}

// touched is every field a migration may change.
type touched struct {
	Encapsulation    []operatorv1.EncapsulationType
	BGP              *operatorv1.BGPOption
	WindowsDataplane *operatorv1.WindowsDataplaneOption
	WindowsNodes     bool
	ServiceCIDRs     []string
	StrictAffinity   *bool
	ServicesEndpoint map[string]string
}

func touchedFields() touched {
	inst := on.Installation()
	t := touched{BGP: inst.Spec.CalicoNetwork.BGP, WindowsDataplane: inst.Spec.CalicoNetwork.WindowsDataplane,
		WindowsNodes: inst.Spec.WindowsNodes != nil, ServiceCIDRs: inst.Spec.ServiceCIDRs}
	for _, p := range inst.Spec.CalicoNetwork.IPPools {
		t.Encapsulation = append(t.Encapsulation, p.Encapsulation)
	}
	ipam := &calicov3.IPAMConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: calico.IPAMConfigName}, ipam); err == nil {
		t.StrictAffinity = &ipam.Spec.StrictAffinity
	}
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}, cm); err == nil {
		t.ServicesEndpoint = cm.Data
	}
	return t
}

// why says what winready and Calico report, for a failed wait.
func why() string {
	msg := "winready: no WindowsReadiness"
	if wr := (&v1alpha1.WindowsReadiness{}); k8s.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr) == nil {
		msg = "winready: " + wr.Status.Message
	}
	list := &operatorv1.TigeraStatusList{}
	if err := k8s.List(ctx, list); err == nil {
		for _, ts := range list.Items {
			msg += fmt.Sprintf("\nTigeraStatus %s: %+v", ts.Name, calico.HealthOf(&ts))
		}
	}
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(calico.SystemNamespace)); err == nil {
		for _, p := range pods.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			msg += fmt.Sprintf("\npod %s on %q: %s ready=%t deleting=%t", p.Name, p.Spec.NodeName, p.Status.Phase, ready, p.DeletionTimestamp != nil)
		}
	}
	return msg
}

func windowsNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-1",
		Labels:      map[string]string{calico.OSLabel: calico.OSWindows},
		Annotations: map[string]string{kwokAnnotation: "fake"}}}
}

func daemonSetEnv(name, env string) string {
	ds := &appsv1.DaemonSet{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: name}, ds)).To(Succeed())
	v, _ := calico.ContainerEnv(ds, "calico-node", env)
	return v
}

// replacements starts counting calico-node's pod replacements per node;
// the function it returns says how many so far.
func replacements() func() map[string]int {
	count, stop, err := calicoBackend.Replacements(ctx, k8s)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
	return count
}

// oncePerNode is every node of the main cluster with one pod replaced.
func oncePerNode() map[string]int {
	m := map[string]int{}
	for _, n := range mainCluster().Nodes {
		m[n.Name] = 1
	}
	return m
}

// healthy is every TigeraStatus Available, not Progressing, not Degraded.
func healthy() error {
	list := &operatorv1.TigeraStatusList{}
	if err := k8s.List(ctx, list); err != nil {
		return err
	}
	for _, ts := range list.Items {
		if h := calico.HealthOf(&ts); !h.Available || h.Progressing || h.Degraded {
			return errorf("TigeraStatus %s: %+v", ts.Name, h)
		}
	}
	return nil
}

// atRest is Calico healthy at the Installation's generation with calico-node
// rolled out: no render or rollout left over from an earlier change (an
// earlier spec's clean-up included) counts toward the next one's.
func atRest() error {
	if err := healthy(); err != nil {
		return err
	}
	h, err := calico.ReadHealth(ctx, k8s, calico.StatusCalico)
	if err != nil {
		return err
	}
	if gen := on.Installation().Generation; h.ObservedGeneration < gen {
		return errorf("TigeraStatus calico at generation %d, the Installation at %d", h.ObservedGeneration, gen)
	}
	ds := &appsv1.DaemonSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}, ds); err != nil {
		return err
	}
	if done, why := calico.RolloutDone(ds); !done {
		return errorf("%s", why)
	}
	return nil
}

// The specs labelled core are what make e2e runs against every Tigera
// operator of E2E_OPERATORS: a refused shape, the Windows join gate, the
// migration with one calico-node replacement per node, the rollback to exactly
// what was there.
var _ = Describe("A platform team making its Calico cluster Windows-ready", Ordered, func() {
	var original touched
	var originalEnv [2]string

	BeforeAll(func() {
		Expect(calicoBackend.Seed(ctx, k8s, mainCluster())).To(Succeed())
		original = touchedFields()
		originalEnv = [2]string{daemonSetEnv(calico.NodeDaemonSet, calico.ServiceHostKey), daemonSetEnv(calico.NodeDaemonSet, calico.ServicePortKey)}
	})

	// Every simulated cluster starts from the Installation calicosim.Defaulted
	// makes of the user's spec. The real backend seeds that spec as written,
	// so here the Tigera operator wrote its defaults itself. The simulator's
	// spec goes through the API server (a dry run) for the CRD schema's own
	// defaults, as the seed's does. Not labelled core: an older operator
	// defaults fields the simulator leaves out (v1.35.0: nonPrivileged) and
	// leaves some it sets (the CNI directories, the pools' assignmentMode).
	It("starts from the Installation the Tigera operator defaulted, as the simulator seeds it", func() {
		inst := on.Installation()
		got, err := json.Marshal(inst.Spec)
		Expect(err).NotTo(HaveOccurred())
		inst.Spec = *calicosim.Defaulted(calicosim.InstallationSpec(mainCluster()))
		Expect(k8s.Update(ctx, inst, client.DryRunAll)).To(Succeed())
		want, err := json.Marshal(inst.Spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(MatchJSON(want))
	})

	It("reads IPAM blocks where the Calico API server serves projectcalico.org/v3 without them", func() {
		withAPIServerKinds()
		block := borrowedBlock()
		Expect(k8s.Create(ctx, block)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, block))).To(Succeed()) })
		createPausedWR()
		Eventually(checkOf(preflight.CheckBorrowed)).Should(And(HaveField("Result", v1alpha1.CheckWarn),
			HaveField("Message", ContainSubstring("on linux-1 (1)"))), why)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused), why)
		deleteWR()
	})

	It("refuses a workload pool the Installation does not describe, naming it, and changes nothing", Label("core"), func() {
		pool := &calicov3.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "hand-made"},
			Spec: calicov3.IPPoolSpec{CIDR: "172.30.0.0/16", VXLANMode: calicov3.VXLANModeCrossSubnet, IPIPMode: calicov3.IPIPModeNever}}
		Expect(k8s.Create(ctx, pool)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, pool))).To(Succeed()) })
		createPausedWR()
		Eventually(checkOf(preflight.CheckForeignPools)).Should(And(HaveField("Result", v1alpha1.CheckFail),
			HaveField("Message", ContainSubstring("hand-made (172.30.0.0/16, vxlanMode CrossSubnet"))), why)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled), why)
		Expect(touchedFields()).To(Equal(original))
		deleteWR()
	})

	It("refuses a Calico older than the oldest winready is tested with, naming its version, and changes nothing", Label(untestedCalico), func() {
		Eventually(func() string { return on.Installation().Status.CalicoVersion }).ShouldNot(BeEmpty(), "the Tigera operator reports its Calico")
		v := on.Installation().Status.CalicoVersion
		parsed, err := utilversion.ParseGeneric(v)
		Expect(err).NotTo(HaveOccurred())
		if !utilversion.MajorMinor(parsed.Major(), parsed.Minor()).LessThan(preflight.OldestTestedCalico) {
			Skip(fmt.Sprintf("Calico %s is a tested version", v))
		}
		createPausedWR()
		Eventually(checkOf(preflight.CheckCalicoVersion)).Should(And(HaveField("Result", v1alpha1.CheckFail),
			HaveField("Message", ContainSubstring("Calico "+v+" is older than winready's oldest tested version"))), why)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled), why)
		Expect(touchedFields()).To(Equal(original))
		deleteWR()
	})

	It("refuses to turn BGP off next to an unencapsulated IPv6 pool in a dual-stack cluster", func() {
		v6 := operatorv1.IPPool{Name: "default-ipv6-ippool", CIDR: "fd00:10:244::/64"}
		setPools(append(on.Installation().Spec.CalicoNetwork.IPPools, v6))
		DeferCleanup(func() { setPools(on.Installation().Spec.CalicoNetwork.IPPools[:1]) })
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKey{Name: v6.Name}, &calicov3.IPPool{}) }).
			Should(Succeed(), "the Tigera operator writes the IPv6 pool")
		createPausedWR()
		Eventually(checkOf(preflight.CheckUnencapsulated)).Should(And(HaveField("Result", v1alpha1.CheckFail),
			HaveField("Message", ContainSubstring("default-ipv6-ippool (fd00:10:244::/64): Windows is IPv4 only"))), why)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled), why)
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)))
		deleteWR()
	})

	It("refuses a cluster without the DNS Service the Windows controller looks up, naming it, and changes nothing", func() {
		dns := &corev1.Service{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, dns)).To(Succeed())
		Expect(k8s.Delete(ctx, dns)).To(Succeed())
		DeferCleanup(func() {
			again := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: dns.Namespace, Name: dns.Name, Labels: dns.Labels},
				Spec: corev1.ServiceSpec{Selector: dns.Spec.Selector, Ports: dns.Spec.Ports}}
			Expect(k8s.Create(ctx, again)).To(Succeed())
		})
		createPausedWR()
		Eventually(checkOf(preflight.CheckKubeDNS)).Should(And(HaveField("Result", v1alpha1.CheckFail),
			HaveField("Message", ContainSubstring("Service kube-system/kube-dns is missing"))), why)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled), why)
		Expect(touchedFields()).To(Equal(original))
		deleteWR()
	})

	It("refuses an overlay Installation that keeps BGP on, giving the patch that fixes it, and changes nothing", func() {
		bgp := operatorv1.BGPEnabled
		overlay := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: "overlay"},
			Spec: operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: &bgp}}}
		Expect(k8s.Create(ctx, overlay)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, overlay))).To(Succeed()) })
		createPausedWR()
		Eventually(checkOf(preflight.CheckOverlay)).Should(And(HaveField("Result", v1alpha1.CheckFail),
			HaveField("Message", ContainSubstring(`Installation overlay sets spec.calicoNetwork.bgp: Enabled`)),
			HaveField("Message", ContainSubstring(`kubectl patch installation overlay --type merge -p '{"spec":{"calicoNetwork":{"bgp":null}}}'`))), why)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled), why)
		Expect(touchedFields()).To(Equal(original))
		deleteWR()
	})

	It("refuses to pin calico-node to one of several API server endpoints, listing them, and changes nothing", func() {
		kubeadm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, kubeadm)).To(Succeed())
		config := kubeadm.Data["ClusterConfiguration"]
		var kept []string
		for _, line := range strings.Split(config, "\n") {
			if !strings.HasPrefix(line, "controlPlaneEndpoint:") {
				kept = append(kept, line)
			}
		}
		setClusterConfiguration := func(c string) {
			Eventually(func() error {
				cm := &corev1.ConfigMap{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(kubeadm), cm); err != nil {
					return err
				}
				cm.Data["ClusterConfiguration"] = c
				return k8s.Update(ctx, cm)
			}).Should(Succeed())
		}
		setClusterConfiguration(strings.Join(kept, "\n"))
		DeferCleanup(func() { setClusterConfiguration(config) })
		members := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes-members",
				Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.2"}}, {Addresses: []string{"10.0.0.3"}}},
		}
		Expect(k8s.Create(ctx, members)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, members))).To(Succeed()) })
		createPausedWR()
		Eventually(checkOf(preflight.CheckAPIServer)).Should(And(HaveField("Result", v1alpha1.CheckFail),
			HaveField("Message", ContainSubstring("10.0.0.2:6443, 10.0.0.3:6443) and no stable address")),
			HaveField("Message", ContainSubstring("Set spec.apiServer"))), why)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled), why)
		Expect(touchedFields()).To(Equal(original))
		deleteWR()
	})

	AfterAll(leaveAsFound)

	It("with no WindowsReadiness, refuses every write a stolen manager token tries, claimed or not", func() {
		stolen := stolenManagerClient()
		claim := `"labels":{"` + calico.ClaimLabel + `":"true"}`
		refused := func(obj client.Object, patch, policy, what string) {
			GinkgoHelper()
			Expect(stolen.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)), client.DryRunAll, client.FieldOwner("winready"))).
				To(MatchError(ContainSubstring("ValidatingAdmissionPolicy '"+policy+"'")), what)
			GinkgoWriter.Printf("stolen token, no WindowsReadiness: %s refused by %s\n", what, policy)
		}
		inst := on.Installation()
		refused(inst, `{"metadata":{`+claim+`},"spec":{"calicoNetwork":{"bgp":"Disabled"}}}`,
			"winready-manager-installation-spec", "BGP off, claimed")
		refused(inst, `{"spec":{"calicoNetwork":{"bgp":"Disabled"}}}`, "winready-manager-installation", "BGP off, unclaimed")
		refused(inst, `{"metadata":{`+claim+`},"spec":{"nodeUpdateStrategy":{"rollingUpdate":{"maxUnavailable":50}}}}`,
			"winready-manager-installation-spec", "maxUnavailable 50, claimed")
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}, ds)).To(Succeed())
		refused(ds, `{"metadata":{`+claim+`,"annotations":{"`+calico.IgnoreAnnotation+`":"true"}}}`,
			"winready-manager-calico-node-hold", "calico-node frozen, claimed")
		refused(ds, `{"metadata":{"annotations":{"`+calico.IgnoreAnnotation+`":"true"}}}`,
			"winready-manager-calico-node", "calico-node frozen, unclaimed")
		endpoint := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap,
			Labels: map[string]string{calico.ClaimLabel: "true"}},
			Data: map[string]string{calico.ServiceHostKey: "192.0.2.1", calico.ServicePortKey: "6443"}}
		Expect(stolen.Create(ctx, endpoint, client.DryRunAll)).
			To(MatchError(ContainSubstring("ValidatingAdmissionPolicy 'winready-manager-services-endpoint")), "an API server address for Calico")
		planted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: manager.Namespace, Name: record.Name,
			Labels: map[string]string{"winready.io/originals": "true", calico.ClaimLabel: "true"}},
			Data: map[string]string{"originals.json": `{"nodeMaxUnavailable":{"present":true,"value":"100%"}}`}}
		Expect(stolen.Create(ctx, planted, client.DryRunAll)).
			To(MatchError(ContainSubstring("ValidatingAdmissionPolicy 'winready-manager-record-create'")), "a planted record")
	})

	It("keeps Windows nodes out while the cluster is not ready, whatever winready's status says", Label("core"), func() {
		createPausedWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused), why)
		joins := func() error { return k8s.Create(ctx, windowsNode(), client.DryRunAll) }
		Eventually(joins).Should(MatchError(And(ContainSubstring("'winready-windows-node-gate-calico'"),
			ContainSubstring("this cluster is not ready for Windows nodes yet"))))

		By("a status forged Ready under the manager's token, before the migration")
		wr := on.WR()
		forged := wr.DeepCopy()
		forged.Status.Phase = v1alpha1.PhaseReady
		Expect(stolenManagerClient().Status().Patch(ctx, forged, client.MergeFrom(wr))).To(Succeed(), "the status is the manager's to write")
		Consistently(joins).Should(MatchError(ContainSubstring("'winready-windows-node-gate-calico'")),
			"the gate reads what the Tigera operator rolled out, not winready's status")
		// A paused WindowsReadiness gets no pass that would write its status
		// again: the next spec waits for Ready, so the forged phase goes.
		now := on.WR()
		restored := now.DeepCopy()
		restored.Status.Phase = wr.Status.Phase
		Expect(stolenManagerClient().Status().Patch(ctx, restored, client.MergeFrom(now))).To(Succeed())
	})

	It("migrates to Ready replacing each calico-node pod once, at the asked pace, and Calico runs the Windows-ready configuration", Label("core"), func() {
		Eventually(atRest).Should(Succeed(), "the earlier specs' changes rendered and rolled out")
		replaced, pace, start := replacements(), templatePaces(), time.Now()
		quarter := intstr.FromString("25%")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Paused = false
			wr.Spec.Rollout.MaxUnavailable = &quarter
		})
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), why)
		GinkgoWriter.Printf("migration: Ready after %s\n", time.Since(start).Round(100*time.Millisecond))
		Eventually(replaced).Should(HaveLen(len(oncePerNode())), "every node's calico-node pod replaced")
		Consistently(replaced).Should(Equal(oncePerNode()),
			"BGP off and the services endpoint reach the Tigera operator together: each calico-node pod replaced once")
		GinkgoWriter.Printf("migration: calico-node pods replaced per node %v\n", replaced())
		By("rolling out at spec.rollout.maxUnavailable, then putting the Installation's value back")
		Expect(pace()).To(ContainElement(HaveField("MaxUnavailable", quarter.String())), "calico-node's DaemonSet as the Tigera operator rendered it")
		Expect(on.Installation().Spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
		Expect(on.WR().Status.Originals.NodeMaxUnavailable).To(HaveValue(Equal(v1alpha1.OriginalValue{Present: true, Value: "1"})))

		inst := on.Installation()
		for _, p := range inst.Spec.CalicoNetwork.IPPools {
			Expect(p.Encapsulation).To(Equal(operatorv1.EncapsulationVXLAN), p.Name)
			pool := &calicov3.IPPool{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: p.Name}, pool)).To(Succeed())
			Expect(pool.Spec.VXLANMode).To(Equal(calicov3.VXLANModeAlways), p.Name)
		}
		Expect(inst.Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)))
		Expect(inst.Spec.CalicoNetwork.WindowsDataplane).To(HaveValue(Equal(operatorv1.WindowsDataplaneHNS)))
		Expect(inst.Spec.ServiceCIDRs).NotTo(BeEmpty())
		Expect(daemonSetEnv(calico.NodeDaemonSet, calico.NetworkingBackendEnv)).To(Equal(calico.BackendVXLAN))
		host, _, _ := net.SplitHostPort(mainCluster().KubeadmConfig.ControlPlaneEndpoint)
		Expect(daemonSetEnv(calico.NodeDaemonSet, calico.ServiceHostKey)).To(Equal(host))
		Expect(touchedFields().StrictAffinity).To(HaveValue(BeTrue()))
		Expect(touchedFields().ServicesEndpoint).To(HaveKeyWithValue(calico.ServiceHostKey, host))
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.WindowsNodeDaemonSet}, &appsv1.DaemonSet{})).To(Succeed())
		Eventually(healthy).Should(Succeed(), "every TigeraStatus Available")
	})

	It("refuses each door a stolen manager token tries, naming the policy, while winready itself migrated under the same rules", func() {
		stolen := stolenManagerClient()
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}, ds)).To(Succeed())
		refused := func(obj client.Object, patch, policy, what string) {
			GinkgoHelper()
			Expect(stolen.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(patch)), client.DryRunAll)).
				To(MatchError(ContainSubstring("ValidatingAdmissionPolicy '"+policy+"'")), what)
			GinkgoWriter.Printf("stolen token: %s refused by %s\n", what, policy)
		}
		refused(ds, `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"attacker.example.com/node:1"}]`,
			"winready-manager-calico-node", "calico-node's image")
		refused(ds, `[{"op":"add","path":"/spec/template/spec/containers/0/command","value":["/bin/sh","-c","id"]}]`,
			"winready-manager-calico-node", "calico-node's command")
		refused(ds, `[{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"X","value":"y"}}]`,
			"winready-manager-calico-node", "an env var of calico-node")
		refused(ds, `[{"op":"add","path":"/spec/template/spec/volumes/-","value":{"name":"root","hostPath":{"path":"/"}}}]`,
			"winready-manager-calico-node", "a hostPath volume on calico-node")
		// Both Installation policies refuse it; the API server names one.
		Expect(stolen.Patch(ctx, on.Installation(), client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable","value":"100%"}]`)), client.DryRunAll)).
			To(MatchError(ContainSubstring("ValidatingAdmissionPolicy 'winready-manager-installation")), "maxUnavailable 100%")

		By("every value bounded by the spec and its direction, in Ready")
		inst := on.Installation()
		refused(inst, `[{"op":"replace","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable","value":1000}]`,
			"winready-manager-installation-spec", "maxUnavailable wider than the spec's")
		refused(inst, `[{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"None"}]`,
			"winready-manager-installation-spec", "a pool's encapsulation None")
		refused(inst, `[{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Enabled"}]`,
			"winready-manager-installation-spec", "BGP back on while migrating")
		refused(inst, `[{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"Disabled"}]`,
			"winready-manager-installation-spec", "the Windows dataplane off while migrating")
		refused(inst, `[{"op":"replace","path":"/spec/serviceCIDRs","value":["0.0.0.0/1","128.0.0.0/1"]}]`,
			"winready-manager-installation", "serviceCIDRs covering every address")
		endpoint := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}, endpoint)).To(Succeed())
		refused(endpoint, `[{"op":"replace","path":"/data/KUBERNETES_SERVICE_HOST","value":"a b\nc: d"}]`,
			"winready-manager-services-endpoint", "an API server host that is no address")
		refused(endpoint, `[{"op":"replace","path":"/data/KUBERNETES_SERVICE_PORT","value":"x"}]`,
			"winready-manager-services-endpoint", "an API server port that is no port")
		refused(endpoint, `[{"op":"add","path":"/immutable","value":true}]`,
			"winready-manager-services-endpoint", "the services endpoint made immutable")
		Expect(stolen.Patch(ctx, ds, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+calico.IgnoreAnnotation+`":"true"}}}`)), client.DryRunAll, client.FieldOwner("kubectl"))).
			To(MatchError(ContainSubstring("ValidatingAdmissionPolicy 'winready-manager-calico-node'")), "a hold under another field manager")

		By("the ignore annotation with no migration under way")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(func() error {
			return stolen.Patch(ctx, ds, client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+calico.ClaimLabel+`":"true"},"annotations":{"`+calico.IgnoreAnnotation+`":"true"}}}`)),
				client.DryRunAll, client.FieldOwner("winready"))
		}).Should(MatchError(ContainSubstring("ValidatingAdmissionPolicy 'winready-manager-calico-node-hold'")))
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })

		By("winready-system: another ConfigMap, and the record deleted mid-migration")
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: manager.Namespace, Name: "attacker"}, Data: map[string]string{"x": "y"}}
		Expect(stolen.Create(ctx, other, client.DryRunAll)).To(MatchError(ContainSubstring("ValidatingAdmissionPolicy 'winready-manager-system'")))
		originals := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: manager.Namespace, Name: record.Name}}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(originals), originals)).To(Succeed(), "the record exists while migrated")
		Expect(stolen.Delete(ctx, originals, client.DryRunAll)).To(MatchError(ContainSubstring("ValidatingAdmissionPolicy 'winready-manager-record'")))

		By("the pod network check's DaemonSet with an extra env")
		check := round.DaemonSet(podcheck.RoundKind, round.DefaultNamespace, manager.Spec.Template.Spec.Containers[0].Image, "r", nil)
		c := &check.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "KUBECONFIG", Value: "/tmp/attacker"})
		Expect(stolen.Create(ctx, check, client.DryRunAll)).To(MatchError(ContainSubstring("ValidatingAdmissionPolicy 'winready-probe-daemonset'")))
	})

	It("rolls back to exactly what was there, replacing each calico-node pod once", Label("core"), func() {
		Eventually(atRest).Should(Succeed())
		replaced, start := replacements(), time.Now()
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack), why)
		GinkgoWriter.Printf("rollback: RolledBack after %s\n", time.Since(start).Round(100*time.Millisecond))
		Eventually(replaced).Should(HaveLen(len(oncePerNode())), "every node's calico-node pod replaced")
		Consistently(replaced).Should(Equal(oncePerNode()), "each calico-node pod replaced once")
		GinkgoWriter.Printf("rollback: calico-node pods replaced per node %v\n", replaced())
		Expect(on.Installation().Spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
		Expect(touchedFields()).To(Equal(original))
		Expect(daemonSetEnv(calico.NodeDaemonSet, calico.NetworkingBackendEnv)).NotTo(Equal(calico.BackendVXLAN))
		By("running calico-node with the API server address it had before, which the Tigera operator keeps")
		Expect([2]string{daemonSetEnv(calico.NodeDaemonSet, calico.ServiceHostKey), daemonSetEnv(calico.NodeDaemonSet, calico.ServicePortKey)}).
			To(Equal(originalEnv))
		Eventually(healthy).Should(Succeed())
		By("leaving calico-node-windows behind, as the Tigera operator does")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.WindowsNodeDaemonSet}, &appsv1.DaemonSet{})).To(Succeed())
	})

	It("migrates again while another client labels the Installation ten times a second, reporting no lost race", func() {
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		reasons, err := contention.WatchReasons(wc)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(reasons.Stop)
		labeler := contention.StartLabeler(k8s, 100*time.Millisecond)
		DeferCleanup(labeler.Stop)
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionMigrate })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), why)
		patches, err := labeler.Stop()
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("contention: %d label patches of the Installation during the migration\n", patches)
		Expect(reasons.Stop()).NotTo(ContainElement(BeElementOf(conditions.ReasonRetryingAfterError, conditions.ReasonRefusedByAPIServer)),
			"a write that lost to the labeler went back to the queue, not into the status")
	})

	It("refuses to roll back while a Windows node exists, and changes nothing", func() {
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), why)
		Eventually(func() error { return k8s.Create(ctx, windowsNode()) }).Should(Succeed(), "a Ready cluster admits Windows nodes")
		migrated := touchedFields()

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled), why)
		Expect(on.WR().Status.Message).To(ContainSubstring("Windows nodes have joined (win-1)"))
		Consistently(touchedFields).Should(Equal(migrated))
		err := k8s.Delete(ctx, windowsNode())
		Expect(err == nil || apierrors.IsNotFound(err)).To(BeTrue())
	})
})
