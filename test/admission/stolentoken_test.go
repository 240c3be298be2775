package admission_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/round"
)

// The doors a leaked manager token would try in winready's namespaces
// (docs/security.md), each refused by the admission policy named in the API
// server's message, while what winready itself writes is admitted. Every
// write is a dry run. calico-node's and the Installation's doors are in
// doors_test.go.
var _ = Describe("A stolen manager token", func() {

	It("creates nothing in winready-system but the record, and cannot delete it during a migration", func() {
		record := func(name string, data map[string]string, labels map[string]string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: name, Labels: labels}, Data: data}
		}
		// As a migration begins, the one time the record is written: with no
		// WindowsReadiness the manager writes none (doors_test.go).
		inState(migrating)
		label := map[string]string{"winready.io/originals": "true", calico.ClaimLabel: "true"}
		good := record("winready-originals", map[string]string{"originals.json": "{}"}, label)
		Eventually(func() error { return createAsManager(record("other", map[string]string{"x": "y"}, nil)) }).
			Should(MatchError(ContainSubstring("winready-manager-system")), "another name")
		Expect(createAsManager(record("winready-originals", map[string]string{"originals.json": "{}", "x": "y"}, label))).
			To(MatchError(ContainSubstring("originals.json alone")))
		Expect(createAsManager(record("winready-originals", map[string]string{"originals.json": strings.Repeat("x", 70000)}, label))).
			To(MatchError(ContainSubstring("at most 64 KiB")))
		Expect(createAsManager(record("winready-originals", map[string]string{"originals.json": "{}"}, nil))).
			To(MatchError(ContainSubstring("labels winready.io/originals and winready.io/claimed")))
		Expect(createAsManager(good.DeepCopy())).To(Succeed())

		Expect(k8s.Create(ctx, good.DeepCopy())).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, good))).To(Succeed()) })
		Expect(managerPatch(good, types.MergePatchType, `{"data":{"originals.json":"{\"bgp\":{}}"}}`)).
			To(HaveOccurred(), "never rewritten")
		Eventually(func() error { return manager.Delete(ctx, good, client.DryRunAll) }).
			Should(MatchError(ContainSubstring("winready-manager-record")), "not during a migration")
		inState(rollingBack)
		Eventually(func() error { return manager.Delete(ctx, good, client.DryRunAll) }).Should(Succeed(), "as a rollback ends")
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
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "winready-probe-plan-linux-0", Labels: labels},
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
