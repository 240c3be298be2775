package controllers_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
)

// The doors a leaked manager token would try (docs/security.md), each
// refused by the admission policy named in the API server's message, while
// what winready itself writes is admitted. Every write is a dry run.
var _ = Describe("A stolen manager token", func() {
	AfterEach(func() { resetCluster(nil) })

	It("changes nothing in calico-node but the hold's annotation, and holds it only while a migration asks", func() {
		seed(calicosim.MainCluster())
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}}
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(ds), ds) }).Should(Succeed())
		refused := map[string]string{
			"its image":                   `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"attacker.example.com/node:1"}]`,
			"its command":                 `[{"op":"add","path":"/spec/template/spec/containers/0/command","value":["/bin/sh","-c","id"]}]`,
			"an env var":                  `[{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"KUBECONFIG","value":"/host/x"}]}]`,
			"a hostPath volume":           `[{"op":"add","path":"/spec/template/spec/volumes","value":[{"name":"root","hostPath":{"path":"/"}}]}]`,
			"its update":                  `[{"op":"add","path":"/spec/updateStrategy","value":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"100%"}}}]`,
			"a label":                     `[{"op":"add","path":"/metadata/labels/example.com~1x","value":"y"}]`,
			"an owner":                    `[{"op":"add","path":"/metadata/ownerReferences","value":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"6e2c41ad-8f21-4a3e-9a0e-1f1f1f1f1f1f"}]}]`,
			"another annotation":          `[{"op":"add","path":"/metadata/annotations","value":{"example.com/x":"y"}}]`,
			"the ignore annotation false": `[{"op":"add","path":"/metadata/annotations","value":{"` + calico.IgnoreAnnotation + `":"false"}}]`,
		}
		Eventually(func() error { return managerPatch(ds, types.JSONPatchType, refused["its image"]) }).
			Should(MatchError(ContainSubstring("winready-manager-calico-node")), "the policy is in force")
		for what, patch := range refused {
			Expect(managerPatch(ds, types.JSONPatchType, patch)).To(MatchError(ContainSubstring("winready-manager-calico-node'")), what)
			Expect(k8s.Patch(ctx, ds, client.RawPatch(types.JSONPatchType, []byte(patch)), client.DryRunAll)).
				To(Succeed(), "the Tigera operator and people are not held to it: %s", what)
		}
		Expect(asManager().Delete(ctx, ds, client.DryRunAll)).To(HaveOccurred(), "no delete")

		hold := `{"metadata":{"annotations":{"` + calico.IgnoreAnnotation + `":"true"}}}`
		release := `{"metadata":{"annotations":{"` + calico.IgnoreAnnotation + `":null}}}`
		By("a dry run, a paused migration and a finished rollback ask for no change")
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = true })
		Eventually(func() error { return managerPatch(ds, types.MergePatchType, hold) }).
			Should(MatchError(ContainSubstring("winready-manager-calico-node-hold")), "the hold policy reads the spec")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun, wr.Spec.Paused = false, true })
		Eventually(func() error { return managerPatch(ds, types.MergePatchType, hold) }).
			Should(MatchError(ContainSubstring("winready-manager-calico-node-hold")), "paused")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Paused, wr.Spec.Direction = false, v1alpha1.DirectionRollback
		})
		wr := on.WR()
		wr.Status.Phase = v1alpha1.PhaseRolledBack
		Expect(k8s.Status().Update(ctx, wr)).To(Succeed())
		Eventually(func() error { return managerPatch(ds, types.MergePatchType, hold) }).
			Should(MatchError(ContainSubstring("winready-manager-calico-node-hold")), "a finished rollback")

		By("a migration asks for the hold; its removal is always admitted")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionMigrate })
		Eventually(func() error { return managerPatch(ds, types.MergePatchType, hold) }).Should(Succeed())
		held := ds.DeepCopy()
		Expect(k8s.Patch(ctx, held, client.RawPatch(types.MergePatchType, []byte(hold)))).To(Succeed())
		Expect(managerPatch(held, types.MergePatchType, release)).To(Succeed())
		on.DeleteWR()
		Expect(managerPatch(held, types.MergePatchType, release)).To(Succeed(), "a hold left by a deleted WindowsReadiness")
	})

	It("sets calico-node's rollout speed only as the spec asks, and no other Installation field it does not own", func() {
		seed(calicosim.MainCluster())
		inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName}}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		Expect(inst.Spec.NodeUpdateStrategy.RollingUpdate).NotTo(BeNil(), "the seed carries the operator's defaults")
		speed := func(v string) string {
			return `[{"op":"replace","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable","value":` + v + `}]`
		}
		on.CreateWR()
		Eventually(func() error { return managerPatch(inst, types.JSONPatchType, speed(`"100%"`)) }).
			Should(MatchError(ContainSubstring("winready-manager-installation-spec")), "no spec asks for a speed")
		Expect(k8s.Patch(ctx, inst, client.RawPatch(types.JSONPatchType, []byte(speed(`"100%"`))), client.DryRunAll)).To(Succeed())

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromString("10%")) })
		Eventually(func() error { return managerPatch(inst, types.JSONPatchType, speed(`"10%"`)) }).Should(Succeed())
		Expect(managerPatch(inst, types.JSONPatchType, speed(`"100%"`))).
			To(MatchError(ContainSubstring("winready-manager-installation-spec")), "a speed the spec does not ask for")
		Expect(managerPatch(inst, types.JSONPatchType, speed(`5`))).
			To(MatchError(ContainSubstring("winready-manager-installation-spec")), "a count the spec does not ask for")
		Expect(k8s.Patch(ctx, inst, client.RawPatch(types.JSONPatchType, []byte(speed(`"10%"`))))).To(Succeed())
		Expect(managerPatch(inst, types.JSONPatchType, speed(`1`))).To(Succeed(), "back from the spec's speed")
		Expect(k8s.Patch(ctx, inst, client.RawPatch(types.JSONPatchType, []byte(speed(`1`))))).To(Succeed())
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(func() error { return managerPatch(inst, types.JSONPatchType, speed(`"10%"`)) }).
			Should(Succeed(), "a rollback rolls out at the spec's speed too")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionMigrate })

		refused := map[string]string{
			"the update type":              `[{"op":"replace","path":"/spec/nodeUpdateStrategy/type","value":"OnDelete"}]`,
			"maxSurge":                     `[{"op":"add","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxSurge","value":1}]`,
			"windowsNodes":                 `[{"op":"add","path":"/spec/windowsNodes","value":{"cniBinDir":"/attacker"}}]`,
			"IPv6 serviceCIDRs":            `[{"op":"add","path":"/spec/serviceCIDRs","value":["fd00::/108"]}]`,
			"a serviceCIDR not a network":  `[{"op":"add","path":"/spec/serviceCIDRs","value":["10.96.0.1/12"]}]`,
			"a serviceCIDR not an address": `[{"op":"add","path":"/spec/serviceCIDRs","value":["attacker"]}]`,
			"a pool duplicated":            `[{"op":"add","path":"/spec/calicoNetwork/ipPools/-","value":` + poolJSON(inst, 0) + `}]`,
		}
		for what, patch := range refused {
			Expect(managerPatch(inst, types.JSONPatchType, patch)).To(MatchError(ContainSubstring("winready-manager-installation'")), what)
		}
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{"10.96.0.0/12"} })
		Eventually(func() error {
			return managerPatch(inst, types.JSONPatchType, `[{"op":"add","path":"/spec/serviceCIDRs","value":["10.100.0.0/16"]}]`)
		}).Should(MatchError(ContainSubstring("winready-manager-installation-spec")), "serviceCIDRs other than the spec's")
		Expect(managerPatch(inst, types.JSONPatchType, `[{"op":"add","path":"/spec/serviceCIDRs","value":["10.96.0.0/12"]}]`)).To(Succeed())
	})

	It("creates nothing in winready-system but the record, and cannot delete it during a migration", func() {
		record := func(name string, data map[string]string, labels map[string]string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: name, Labels: labels}, Data: data}
		}
		label := map[string]string{"winready.io/originals": "true"}
		good := record("winready-originals", map[string]string{"originals.json": "{}"}, label)
		Eventually(func() error { return createAsManager(record("other", map[string]string{"x": "y"}, nil)) }).
			Should(MatchError(ContainSubstring("winready-manager-system")), "another name")
		Expect(createAsManager(record("winready-originals", map[string]string{"originals.json": "{}", "x": "y"}, label))).
			To(MatchError(ContainSubstring("originals.json alone")))
		Expect(createAsManager(record("winready-originals", map[string]string{"originals.json": strings.Repeat("x", 70000)}, label))).
			To(MatchError(ContainSubstring("at most 64 KiB")))
		Expect(createAsManager(record("winready-originals", map[string]string{"originals.json": "{}"}, nil))).
			To(MatchError(ContainSubstring("label winready.io/originals")))
		Expect(createAsManager(good.DeepCopy())).To(Succeed())

		Expect(k8s.Create(ctx, good.DeepCopy())).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, good))).To(Succeed()) })
		Expect(managerPatch(good, types.MergePatchType, `{"data":{"originals.json":"{\"bgp\":{}}"}}`)).
			To(HaveOccurred(), "never rewritten")
		on.CreateWR()
		Eventually(func() error { return asManager().Delete(ctx, good, client.DryRunAll) }).
			Should(MatchError(ContainSubstring("winready-manager-record")), "not during a migration")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(func() error { return asManager().Delete(ctx, good, client.DryRunAll) }).Should(Succeed(), "as a rollback ends")
	})

	It("runs no other DaemonSet in the probe namespace, nor the pod network check otherwise than winready builds it", func() {
		base := podCheckDaemonSet()
		Expect(createAsManager(base.DeepCopy())).To(Succeed(), "as winready builds it")
		changed := map[string]func(*appsv1.DaemonSet){
			"an env var": func(ds *appsv1.DaemonSet) {
				c := &ds.Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "KUBECONFIG", Value: "/tmp/attacker"})
			},
			"envFrom": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "attacker"}}}}
			},
			"a volume": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				ds.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "x", MountPath: "/x"}}
			},
			"its resources": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Resources.Limits = nil
			},
			"another name": func(ds *appsv1.DaemonSet) { ds.Name = "winready-miner" },
		}
		for what, change := range changed {
			ds := base.DeepCopy()
			change(ds)
			Expect(createAsManager(ds)).To(MatchError(ContainSubstring("winready-probe-daemonset")), what)
		}
	})

	It("writes plans that can never count as reports, and small", func() {
		plan := func(labels map[string]string, body string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: "winready-probe-plan-linux-0", Labels: labels},
				Data: map[string]string{round.NodeKey: "linux-0", round.PlanKey: body}}
		}
		labels := map[string]string{round.ComponentLabel: "probe", round.PlanLabel: "r"}
		Expect(createAsManager(plan(labels, "{}"))).To(Succeed())
		Expect(createAsManager(plan(map[string]string{round.ComponentLabel: "probe", round.PlanLabel: "r", round.ReportLabel: "r"}, "{}"))).
			To(MatchError(ContainSubstring("never a report's")))
		Expect(createAsManager(plan(map[string]string{round.ComponentLabel: "probe", round.ReportLabel: "r"}, "{}"))).
			To(MatchError(ContainSubstring("winready-probe-plans")))
		Expect(createAsManager(plan(labels, strings.Repeat("x", 9000)))).To(MatchError(ContainSubstring("at most 8 KiB")))
	})
})

// poolJSON is pool i of the Installation as JSON.
func poolJSON(inst *operatorv1.Installation, i int) string {
	p := inst.Spec.CalicoNetwork.IPPools[i]
	return `{"name":"` + p.Name + `-copy","cidr":"` + p.CIDR + `","encapsulation":"VXLAN"}`
}
