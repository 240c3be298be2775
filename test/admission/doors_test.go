package admission_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

const (
	installationPolicy = "winready-manager-installation"
	specPolicy         = "winready-manager-installation-spec"
	// Both refuse; the API server names one.
	bothInstallationPolicies = "winready-manager-installation*"
	endpointPolicy           = "winready-manager-services-endpoint"
	endpointSpecPolicy       = "winready-manager-services-endpoint-spec"
	bothEndpointPolicies     = "winready-manager-services-endpoint*"
	holdPolicy               = "winready-manager-calico-node-hold"
	gatePolicy               = "winready-windows-node-gate"
	gateCalicoPolicy         = "winready-windows-node-gate-calico"
)

// A WindowsReadiness state a door is tried in; nil means none exists.
type wrState func(*v1alpha1.WindowsReadiness)

var (
	noWindowsReadiness wrState
	migrating          wrState = func(*v1alpha1.WindowsReadiness) {}
	migratingAt10      wrState = func(wr *v1alpha1.WindowsReadiness) {
		wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromString("10%"))
	}
	rollingBack wrState = func(wr *v1alpha1.WindowsReadiness) {
		wr.Spec.Direction = v1alpha1.DirectionRollback
	}
	paused wrState = func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true }
	named  wrState = func(wr *v1alpha1.WindowsReadiness) {
		wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.10", Port: 6443}
		wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{"10.96.0.0/12"}
	}
)

// inState puts WindowsReadiness default into state.
func inState(state wrState) {
	if state == nil {
		noWR()
		return
	}
	setWR(func(wr *v1alpha1.WindowsReadiness) { state(wr) })
}

// baseInstallation is a Tigera operator cluster before the migration:
// VXLANCrossSubnet with BGP, calico-node one node at a time.
func baseInstallation(inst *operatorv1.Installation) {
	inst.Spec = operatorv1.InstallationSpec{
		CalicoNetwork: &operatorv1.CalicoNetworkSpec{
			BGP: ptr.To(operatorv1.BGPEnabled),
			IPPools: []operatorv1.IPPool{{Name: "default-ipv4-ippool", CIDR: "172.20.0.0/16",
				Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet}},
		},
		NodeUpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
	}
}

// windowsReady is the Installation a migration leaves.
func windowsReady(inst *operatorv1.Installation) {
	baseInstallation(inst)
	cn := inst.Spec.CalicoNetwork
	cn.BGP = ptr.To(operatorv1.BGPDisabled)
	cn.WindowsDataplane = ptr.To(operatorv1.WindowsDataplaneHNS)
	cn.IPPools[0].Encapsulation = operatorv1.EncapsulationVXLAN
	inst.Spec.ServiceCIDRs = []string{"10.96.0.0/12"}
}

// setInstallation makes Installation default hold what each mutate writes,
// as the Tigera operator and people would (status.computed included), and
// returns it as read back.
func setInstallation(mutate ...func(*operatorv1.Installation)) *operatorv1.Installation {
	inst := &operatorv1.Installation{}
	err := k8s.Get(ctx, client.ObjectKey{Name: calico.InstallationName}, inst)
	if apierrors.IsNotFound(err) {
		inst = &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName}}
		baseInstallation(inst)
		Expect(k8s.Create(ctx, inst)).To(Succeed())
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	want := &operatorv1.Installation{}
	baseInstallation(want)
	for _, m := range mutate {
		m(want)
	}
	inst.Spec, inst.Labels, inst.Annotations = want.Spec, want.Labels, want.Annotations
	Expect(k8s.Update(ctx, inst)).To(Succeed())
	inst.Status = want.Status
	Expect(k8s.Status().Update(ctx, inst)).To(Succeed())
	return inst
}

// installationDoor tries change on Installation default as it is after old:
// the manager's token is refused by policy, an admin is not.
func installationDoor(state wrState, old, change func(*operatorv1.Installation), policy string) {
	inState(state)
	inst := setInstallation(old)
	changed := inst.DeepCopy()
	change(changed)
	patch := client.MergeFrom(inst)
	// The manager's every write claims the Installation; an unclaimed one
	// is refused for that alone.
	Eventually(func() error { return manager.Patch(ctx, claimed(changed.DeepCopy()), patch, client.DryRunAll) }).
		Should(refusedBy(policy), "the manager's token")
	Expect(k8s.Patch(ctx, changed.DeepCopy(), patch, client.DryRunAll)).To(Succeed(), "an admin")
}

func speed(v intstr.IntOrString) func(*operatorv1.Installation) {
	return func(inst *operatorv1.Installation) {
		inst.Spec.NodeUpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &v}
	}
}

func then(fs ...func(*operatorv1.Installation)) func(*operatorv1.Installation) {
	return func(inst *operatorv1.Installation) {
		for _, f := range fs {
			f(inst)
		}
	}
}

func encapsulation(e operatorv1.EncapsulationType) func(*operatorv1.Installation) {
	return func(inst *operatorv1.Installation) { inst.Spec.CalicoNetwork.IPPools[0].Encapsulation = e }
}

func bgp(b operatorv1.BGPOption) func(*operatorv1.Installation) {
	return func(inst *operatorv1.Installation) { inst.Spec.CalicoNetwork.BGP = &b }
}

func windowsDataplane(w operatorv1.WindowsDataplaneOption) func(*operatorv1.Installation) {
	return func(inst *operatorv1.Installation) { inst.Spec.CalicoNetwork.WindowsDataplane = &w }
}

func serviceCIDRs(c ...string) func(*operatorv1.Installation) {
	return func(inst *operatorv1.Installation) { inst.Spec.ServiceCIDRs = c }
}

var _ = Describe("The Installation under the manager's token", func() {
	DescribeTable("refuses a door",
		installationDoor,
		// Item 2: maxUnavailable of any value.
		Entry("maxUnavailable 100% with no WindowsReadiness", noWindowsReadiness, baseInstallation,
			speed(intstr.FromString("100%")), bothInstallationPolicies),
		Entry("maxUnavailable 100% once the spec's 10% is there", migratingAt10, speed(intstr.FromString("10%")),
			speed(intstr.FromString("100%")), bothInstallationPolicies),
		Entry("maxUnavailable 100% in Ready, after the speed was put back", migratingAt10, windowsReady,
			speed(intstr.FromString("100%")), bothInstallationPolicies),
		Entry("maxUnavailable 20%, within the CRD's bound but wider than the spec's", migratingAt10,
			speed(intstr.FromString("10%")), speed(intstr.FromString("20%")), specPolicy),
		Entry("maxUnavailable as a count wider than the one there", migratingAt10, baseInstallation,
			speed(intstr.FromInt32(50)), specPolicy),
		Entry("maxUnavailable 0%", migratingAt10, baseInstallation, speed(intstr.FromString("0%")), bothInstallationPolicies),
		// Item 3: against the direction.
		Entry("a pool's encapsulation None while migrating", migrating, baseInstallation,
			encapsulation(operatorv1.EncapsulationNone), specPolicy),
		Entry("a pool's encapsulation back to CrossSubnet while migrating", migrating, windowsReady,
			encapsulation(operatorv1.EncapsulationVXLANCrossSubnet), specPolicy),
		Entry("a pool's encapsulation None while rolling back", rollingBack, baseInstallation,
			encapsulation(operatorv1.EncapsulationNone), specPolicy),
		Entry("the Windows dataplane Disabled while migrating", migrating, windowsReady,
			windowsDataplane(operatorv1.WindowsDataplaneDisabled), specPolicy),
		Entry("the Windows dataplane HNS while rolling back", rollingBack, baseInstallation,
			windowsDataplane(operatorv1.WindowsDataplaneHNS), specPolicy),
		Entry("BGP back on while migrating", migrating, windowsReady, bgp(operatorv1.BGPEnabled), specPolicy),
		Entry("BGP off while rolling back", rollingBack, baseInstallation, bgp(operatorv1.BGPDisabled), specPolicy),
		Entry("BGP off while paused", paused, baseInstallation, bgp(operatorv1.BGPDisabled), specPolicy),
		// Item 8: service networks that are not one.
		Entry("serviceCIDRs covering every address when the spec names none", migrating, baseInstallation,
			serviceCIDRs("0.0.0.0/1", "128.0.0.0/1"), installationPolicy),
		Entry("serviceCIDRs covering every address in a rollback", rollingBack, windowsReady,
			serviceCIDRs("0.0.0.0/1", "128.0.0.0/1"), installationPolicy),
		Entry("serviceCIDRs other than the spec's", named, baseInstallation, serviceCIDRs("10.100.0.0/16"), specPolicy),
		// Fields winready does not own, moved from the controllers suite.
		Entry("the update type", migrating, baseInstallation, func(inst *operatorv1.Installation) {
			inst.Spec.NodeUpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
		}, installationPolicy),
		Entry("maxSurge", migratingAt10, baseInstallation, func(inst *operatorv1.Installation) {
			inst.Spec.NodeUpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
		}, installationPolicy),
		Entry("windowsNodes set", migrating, windowsReady, func(inst *operatorv1.Installation) {
			inst.Spec.WindowsNodes = &operatorv1.WindowsNodeSpec{CNIBinDir: "/attacker"}
		}, installationPolicy),
		Entry("IPv6 serviceCIDRs", migrating, baseInstallation, serviceCIDRs("fd00::/108"), installationPolicy),
		Entry("a serviceCIDR not a network", migrating, baseInstallation, serviceCIDRs("10.96.0.1/12"), installationPolicy),
		Entry("a serviceCIDR not an address", migrating, baseInstallation, serviceCIDRs("attacker"), installationPolicy),
		Entry("a pool duplicated", migrating, baseInstallation, func(inst *operatorv1.Installation) {
			p := inst.Spec.CalicoNetwork.IPPools[0]
			p.Name += "-copy"
			inst.Spec.CalicoNetwork.IPPools = append(inst.Spec.CalicoNetwork.IPPools, p)
		}, installationPolicy),
		Entry("the registry", migrating, baseInstallation, func(inst *operatorv1.Installation) {
			inst.Spec.Registry = "attacker.example.com/"
		}, installationPolicy),
		// The gate's switch lives on the Installation, where the manager
		// cannot write it.
		Entry("the Windows join gate's label", migrating, baseInstallation, func(inst *operatorv1.Installation) {
			inst.Labels = map[string]string{"winready.io/windows-node-gate": "Disabled"}
		}, installationPolicy),
	)
})

// servicesEndpoint is ConfigMap kubernetes-services-endpoint with data, or
// nil data for none.
func servicesEndpoint(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap},
		Data: data}
}

// endpointDoor tries writing data into the services endpoint (created when
// old is nil): refused for the manager by policy, admitted for an admin.
func endpointDoor(state wrState, old map[string]string, change func(*corev1.ConfigMap), policy string) {
	inState(state)
	cm := servicesEndpoint(old)
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, servicesEndpoint(nil)))).To(Succeed())
	write := func(c client.Client) error {
		changed := cm.DeepCopy()
		if c == manager {
			// The manager's every write claims the ConfigMap.
			claimed(changed)
		}
		change(changed)
		if old == nil {
			return c.Create(ctx, changed, client.DryRunAll)
		}
		return c.Patch(ctx, changed, client.MergeFrom(cm), client.DryRunAll)
	}
	if old != nil {
		Expect(k8s.Create(ctx, cm)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, servicesEndpoint(nil)))).To(Succeed()) })
	}
	Eventually(func() error { return write(manager) }).Should(refusedBy(policy), "the manager's token")
	Expect(write(k8s)).To(Succeed(), "an admin")
}

func endpoint(host, port string) func(*corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) {
		cm.Data = map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
	}
}

var _ = Describe("The services endpoint under the manager's token", func() {
	recorded := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10", "KUBERNETES_SERVICE_PORT": "6443"}
	DescribeTable("refuses a door",
		endpointDoor,
		// Item 1: the API server address of every Calico component.
		Entry("a host other than the spec's", named, nil, endpoint("192.0.2.1", "6443"), endpointSpecPolicy),
		Entry("a port other than the spec's", named, recorded, endpoint("10.0.0.10", "443"), endpointSpecPolicy),
		Entry("a host that is no address", noWindowsReadiness, nil, endpoint("a b\nc: d", "6443"), bothEndpointPolicies),
		Entry("a port that is no port", migrating, nil, endpoint("10.0.0.10", "x"), endpointPolicy),
		Entry("a port out of range", migrating, nil, endpoint("10.0.0.10", "70000"), endpointPolicy),
		Entry("an immutable ConfigMap", migrating, nil, func(cm *corev1.ConfigMap) {
			endpoint("10.0.0.10", "6443")(cm)
			cm.Immutable = ptr.To(true)
		}, endpointPolicy),
		Entry("made immutable", migrating, recorded, func(cm *corev1.ConfigMap) { cm.Immutable = ptr.To(true) }, endpointPolicy),
		Entry("labels on create", migrating, nil, func(cm *corev1.ConfigMap) {
			endpoint("10.0.0.10", "6443")(cm)
			cm.Labels = map[string]string{"example.com/x": "y", calico.ClaimLabel: cm.Labels[calico.ClaimLabel]}
		}, endpointPolicy),
		Entry("a change while paused", paused, recorded, endpoint("10.0.0.11", "6443"), endpointSpecPolicy),
		Entry("a key added in a rollback", rollingBack, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10"},
			endpoint("10.0.0.10", "6443"), endpointSpecPolicy),
	)
})

// computed makes status.computed the spec, as the Tigera operator writes it
// once everything it renders is available.
func computed(inst *operatorv1.Installation) { inst.Status.Computed = inst.Spec.DeepCopy() }

// joins is a Windows node's create, as its kubelet sends it, in a dry run.
func joins() error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-1", Labels: map[string]string{calico.OSLabel: calico.OSWindows}}}
	return k8s.Create(ctx, node, client.DryRunAll)
}

var _ = Describe("The Windows join gate", func() {
	It("opens from what the Tigera operator rolled out and the spec, never from winready's status", func() {
		By("a forged Ready during a migration opens nothing (item 5)")
		inState(migrating)
		setInstallation(then(bgp(operatorv1.BGPDisabled), encapsulation(operatorv1.EncapsulationVXLAN)), computed)
		forgeStatus(v1alpha1.PhaseReady)
		Eventually(joins).Should(refusedBy(gateCalicoPolicy))
		Consistently(joins).Should(refusedBy(gateCalicoPolicy))

		By("the Windows dataplane written but not yet rolled out keeps it closed")
		setInstallation(windowsReady)
		Eventually(joins).Should(refusedBy(gateCalicoPolicy))

		By("rolled out, it opens")
		setInstallation(windowsReady, computed)
		Eventually(joins).Should(Succeed())

		By("a rollback closes it at once, whatever the status says")
		inState(rollingBack)
		Eventually(joins).Should(refusedBy(gatePolicy))
		Expect(joins()).To(MatchError(ContainSubstring("spec.direction: Rollback")))

		By("a person lifts both halves, and only a person can")
		inState(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.WindowsNodeGate = v1alpha1.GateDisabled })
		setInstallation()
		Eventually(joins).Should(refusedBy(gateCalicoPolicy), "the spec lifts the first half only")
		setInstallation(func(inst *operatorv1.Installation) {
			inst.Labels = map[string]string{"winready.io/windows-node-gate": "Disabled"}
		})
		Eventually(joins).Should(Succeed())

		By("with no WindowsReadiness the Installation still decides")
		inState(noWindowsReadiness)
		setInstallation()
		Eventually(joins).Should(refusedBy(gateCalicoPolicy))
		setInstallation(windowsReady, computed)
		Eventually(joins).Should(Succeed())
	})
})

// calicoNode is DaemonSet calico-node as the Tigera operator left it.
func calicoNode() *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "calico-node"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "calico-node"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "calico-node", Image: "calico/node:v3.32.0",
					Env: []corev1.EnvVar{{Name: "CALICO_NETWORKING_BACKEND", Value: "bird"}}}}},
			}}}
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, ds))).To(Succeed())
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ds), ds)).To(Succeed())
	return ds
}

var _ = Describe("calico-node under the manager's token", func() {
	DescribeTable("changes nothing but the hold's annotation",
		func(patch string) {
			inState(migrating)
			ds := calicoNode()
			Eventually(func() error {
				return manager.Patch(ctx, ds.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(patch)), client.DryRunAll)
			}).Should(refusedBy("winready-manager-calico-node"), "the manager's token")
			Expect(k8s.Patch(ctx, ds.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(patch)), client.DryRunAll)).
				To(Succeed(), "the Tigera operator and people are not held to it")
		},
		Entry("its image", `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"attacker.example.com/node:1"}]`),
		Entry("its command", `[{"op":"add","path":"/spec/template/spec/containers/0/command","value":["/bin/sh","-c","id"]}]`),
		Entry("an env var", `[{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"KUBECONFIG","value":"/host/x"}}]`),
		Entry("a hostPath volume", `[{"op":"add","path":"/spec/template/spec/volumes","value":[{"name":"root","hostPath":{"path":"/"}}]}]`),
		Entry("its update", `[{"op":"add","path":"/spec/updateStrategy","value":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"100%"}}}]`),
		Entry("a label", `[{"op":"add","path":"/metadata/labels","value":{"example.com/x":"y"}}]`),
		Entry("an owner", `[{"op":"add","path":"/metadata/ownerReferences","value":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"6e2c41ad-8f21-4a3e-9a0e-1f1f1f1f1f1f"}]}]`),
		Entry("another annotation", `[{"op":"add","path":"/metadata/annotations","value":{"example.com/x":"y"}}]`),
		Entry("the ignore annotation false", `[{"op":"add","path":"/metadata/annotations","value":{"`+calico.IgnoreAnnotation+`":"false"}}]`),
	)

	It("is never created or deleted", func() {
		ds := calicoNode()
		Expect(manager.Delete(ctx, ds, client.DryRunAll)).To(HaveOccurred(), "no delete")
		other := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: calico.SystemNamespace, Name: "other"}, Spec: ds.Spec}
		Expect(manager.Create(ctx, other, client.DryRunAll)).To(HaveOccurred(), "no create")
	})

	It("is held only with winready's claim while the spec asks for a change, whatever the status says", func() {
		ds := calicoNode()
		hold := func(claim bool) func() error {
			return func() error {
				held := ds.DeepCopy()
				if claim {
					claimed(held)
				}
				held.Annotations = map[string]string{calico.IgnoreAnnotation: "true"}
				return manager.Patch(ctx, held, client.MergeFrom(ds), client.DryRunAll)
			}
		}
		inState(paused)
		forgeStatus(v1alpha1.PhaseMigrating)
		Eventually(hold(true)).Should(refusedBy(holdPolicy), "paused")
		inState(noWindowsReadiness)
		Eventually(hold(true)).Should(refusedBy(holdPolicy), "with no WindowsReadiness (item 7)")
		Expect(hold(false)()).To(refusedBy("winready-manager-calico-node"), "unclaimed")
		inState(migrating)
		Eventually(hold(true)).Should(Succeed(), "a migration holds it")
		Expect(hold(false)()).To(refusedBy("winready-manager-calico-node"), "unclaimed, never")

		By("a hold is released, claim and all, while the WindowsReadiness exists")
		held := claimed(ds.DeepCopy())
		held.Annotations = map[string]string{calico.IgnoreAnnotation: "true"}
		Expect(k8s.Patch(ctx, held, client.MergeFrom(ds))).To(Succeed())
		released := held.DeepCopy()
		delete(released.Annotations, calico.IgnoreAnnotation)
		delete(released.Labels, calico.ClaimLabel)
		release := func() error { return manager.Patch(ctx, released.DeepCopy(), client.MergeFrom(held), client.DryRunAll) }
		Expect(release()).To(Succeed(), "its removal is admitted")
		inState(paused)
		Eventually(release).Should(Succeed(), "paused too")
		Expect(k8s.Patch(ctx, released.DeepCopy(), client.MergeFrom(held))).To(Succeed())

		By("a hold an earlier winready left unclaimed is released with no WindowsReadiness")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ds), ds)).To(Succeed())
		legacy := ds.DeepCopy()
		legacy.Annotations = map[string]string{calico.IgnoreAnnotation: "true"}
		Expect(k8s.Patch(ctx, legacy, client.MergeFrom(ds))).To(Succeed())
		DeferCleanup(func(legacy *appsv1.DaemonSet) {
			gone := legacy.DeepCopy()
			delete(gone.Annotations, calico.IgnoreAnnotation)
			Expect(k8s.Patch(ctx, gone, client.MergeFrom(legacy))).To(Succeed())
		}, legacy)
		inState(noWindowsReadiness)
		gone := legacy.DeepCopy()
		delete(gone.Annotations, calico.IgnoreAnnotation)
		Expect(manager.Patch(ctx, gone, client.MergeFrom(legacy), client.DryRunAll)).To(Succeed())

		By("a hold under another field manager, which winready would take for a person's and leave")
		inState(migrating)
		other := claimed(ds.DeepCopy())
		other.Annotations = map[string]string{calico.IgnoreAnnotation: "true"}
		Expect(manager.Patch(ctx, other, client.MergeFrom(ds), client.DryRunAll, client.FieldOwner("kubectl-annotate"))).
			To(refusedBy("winready-manager-calico-node"))
		Expect(k8s.Patch(ctx, other.DeepCopy(), client.MergeFrom(ds), client.DryRunAll, client.FieldOwner("kubectl-annotate"))).
			To(Succeed(), "a person holds calico-node as they like")
	})
})

var _ = Describe("The record of the originals under the manager's token", func() {
	It("is never created during a rollback, where its delete is admitted (item 6)", func() {
		planted := func() *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "winready-originals",
				Labels: map[string]string{"winready.io/originals": "true"}},
				Data: map[string]string{"originals.json": `{"nodeMaxUnavailable":{"present":true,"value":"100%"}}`}}
		}
		inState(rollingBack)
		Eventually(func() error { return manager.Create(ctx, claimed(planted()), client.DryRunAll) }).
			Should(refusedBy("winready-manager-record-create"), "the manager's token")
		Expect(k8s.Create(ctx, planted(), client.DryRunAll)).To(Succeed(), "an admin")
		inState(migrating)
		Eventually(func() error { return manager.Create(ctx, claimed(planted()), client.DryRunAll) }).
			Should(Succeed(), "as a migration begins")
		Expect(manager.Create(ctx, planted(), client.DryRunAll)).To(refusedBy("winready-manager-system"), "unclaimed")
	})
})
