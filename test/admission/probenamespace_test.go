package admission_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/probens"
)

var _ = Describe("Admission in the probe namespace", func() {
	It("admits only the probe DaemonSet, exactly as winready builds it", func() {
		Eventually(func() error { return createAsManager(probeDaemonSet(managerImage)) }).Should(Succeed(), "the real probe")
		rejected := map[string]func(*appsv1.DaemonSet){
			"mounts no volumes": func(ds *appsv1.DaemonSet) {
				pod := &ds.Spec.Template.Spec
				pod.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
				pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
			},
			"is privileged or may escalate": func(ds *appsv1.DaemonSet) {
				sc := ds.Spec.Template.Spec.Containers[0].SecurityContext
				sc.Privileged, sc.AllowPrivilegeEscalation = ptr.To(true), ptr.To(true)
			},
			"manager's own image": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Image = "registry.example.com/attacker:latest"
			},
			"adds only NET_RAW": func(ds *appsv1.DaemonSet) {
				caps := ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities
				caps.Add = append(caps.Add, "SYS_ADMIN")
			},
			"its fixed command": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "id"}
			},
			"read-only root filesystem": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
			},
			// A host-process container needs the host network, which only
			// the probe has.
			"no hostProcess": func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].SecurityContext.WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}
			},
			"no other host namespace":              func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostPID = true },
			"only the probe uses the host network": func(ds *appsv1.DaemonSet) { ds.Name = "other" },
		}
		for why, change := range podTemplatePins {
			rejected[why] = change
		}
		for why, change := range rejected {
			ds := probeDaemonSet(managerImage)
			change(ds)
			Expect(createAsManager(ds)).To(MatchError(ContainSubstring(why)), why)
		}
		for why, change := range podTemplatePins {
			check := round.DaemonSet(podcheck.RoundKind, probeNS, managerImage, "r", nil)
			change(check)
			Expect(createAsManager(check)).To(MatchError(ContainSubstring(why)), "the pod network check: %s", why)
		}
		check := round.DaemonSet(podcheck.RoundKind, probeNS, managerImage, "r", nil)
		check.Spec.Template.Spec.Containers[0].Args = []string{"probe", "--namespace=" + probeNS}
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("the pod network check runs its fixed command")))
		// An unmasked /proc needs a user namespace, which the API server's
		// validation already refuses on the host network: only the pod
		// network check could ask for it.
		check = round.DaemonSet(podcheck.RoundKind, probeNS, managerImage, "r", nil)
		check.Spec.Template.Spec.HostUsers = ptr.To(false)
		check.Spec.Template.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("no procMount")))
		check = round.DaemonSet(podcheck.RoundKind, probeNS, managerImage, "r", nil)
		check.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "any"}}}}}}}}
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("no Secret in a projected volume")))

		By("leaving room for DaemonSets at the restricted level, such as the pod network check")
		check = round.DaemonSet(podcheck.RoundKind, probeNS, managerImage, "r", nil)
		Expect(createAsManager(check)).To(Succeed())
		check.Spec.Template.Spec.ServiceAccountName = probe.ServiceAccount
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("only the probe runs as the winready-probe ServiceAccount")))
		check = round.DaemonSet(podcheck.RoundKind, probeNS, managerImage, "r", nil)
		check.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_RAW"}
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("drop all capabilities")))
		check = round.DaemonSet(podcheck.RoundKind, probeNS, managerImage, "r", nil)
		check.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
		Expect(createAsManager(check)).To(MatchError(ContainSubstring("run as non-root")))

		outside := probeDaemonSet(managerImage)
		outside.Namespace = systemNS
		Expect(apierrors.IsForbidden(createAsManager(outside))).To(BeTrue(), "no DaemonSet outside the probe namespace")
	})
})

// podTemplatePins are changes to a pod template that no DaemonSet in the
// probe namespace may make, by the message that refuses each.
var podTemplatePins = map[string]func(*appsv1.DaemonSet){
	"seccomp RuntimeDefault": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	},
	"no AppArmor Unconfined": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	},
	"no SELinux options": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
	},
	"no lifecycle hooks": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "id"}}}}
	},
	"no probe reaches another host": func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Path: "/latest/meta-data/", Port: intstr.FromInt32(80)}}}
	},
	"no priority class": func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.PriorityClassName = "system-node-critical" },
	"no runtime class":  func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.RuntimeClassName = ptr.To("unconfined") },
}

var _ = Describe("Services in the probe namespace", func() {
	It("admit only the pod network check's ClusterIP Service", func() {
		svc := func(change func(*corev1.Service)) *corev1.Service {
			s := podcheck.Service(probeNS, nil)
			change(s)
			return s
		}
		Eventually(func() error {
			return createAsManager(svc(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"8.8.8.8"} }))
		}).Should(MatchError(ContainSubstring("no external IPs")), "the policy is in force")
		Expect(createAsManager(svc(func(*corev1.Service) {}))).To(Succeed(), "the pod network check's Service")
		rejected := map[string]func(*corev1.Service){
			"type ClusterIP":  func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort },
			"type ClusterIP ": func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer },
			"no external IPs": func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"10.96.0.1"} },
			"only the Service winready-podcheck": func(s *corev1.Service) {
				s.Name = "other"
			},
			"selects only the pod network check's pods": func(s *corev1.Service) {
				s.Spec.Selector = map[string]string{"app.kubernetes.io/component": "probe", "app.kubernetes.io/name": "winready"}
			},
			"only its echo port": func(s *corev1.Service) {
				s.Spec.Ports[0].TargetPort = intstr.FromInt32(10250)
			},
			"only its echo port ": func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "kubelet", Port: 10250, Protocol: corev1.ProtocolTCP})
			},
		}
		for why, change := range rejected {
			Expect(createAsManager(svc(change))).To(MatchError(ContainSubstring(strings.TrimSpace(why))), why)
		}
	})
})

// probeDaemonSet is the probe DaemonSet the reconciler creates.
func probeDaemonSet(image string) *appsv1.DaemonSet {
	return round.DaemonSet(probe.RoundKind, probeNS, image, "r", nil)
}

// createAsManager creates obj in a dry run, as the manager's ServiceAccount.
func createAsManager(obj client.Object) error {
	return manager.Create(ctx, obj, client.DryRunAll)
}

// podCheckDaemonSet is the pod network check's DaemonSet the reconciler
// creates.
func podCheckDaemonSet() *appsv1.DaemonSet {
	return round.DaemonSet(podcheck.RoundKind, probeNS, managerImage, "r", nil)
}

// createPod creates pod in a dry run, as the DaemonSet controller would
// (admission holds anyone to the same rules there).
func createPod(pod *corev1.Pod) error {
	return k8s.Create(ctx, pod, client.DryRunAll)
}

var _ = Describe("Pods in the probe namespace", func() {
	It("are held to the probe's and the pod network check's shape, whoever creates them", func() {
		Eventually(func() error { return createPod(probens.DaemonSetPod(probeDaemonSet(managerImage), "node-a")) }).
			Should(Succeed(), "the probe's Pod, as the DaemonSet controller makes it")
		Expect(createPod(probens.DaemonSetPod(podCheckDaemonSet(), "node-a"))).To(Succeed(), "the pod network check's Pod")

		// A runtime class must exist for the API server to admit its name.
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "unconfined"}, Handler: "unconfined"}
		Expect(k8s.Create(ctx, rc)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, rc)).To(Succeed()) })
		for why, change := range podTemplatePins {
			for _, ds := range []*appsv1.DaemonSet{probeDaemonSet(managerImage), podCheckDaemonSet()} {
				change(ds)
				Expect(createPod(probens.DaemonSetPod(ds, "node-a"))).To(MatchError(ContainSubstring(why)), "a Pod of %s: %s", ds.Name, why)
			}
		}
		rejected := map[string]func(*corev1.Pod){
			"mounts no volumes": func(p *corev1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			},
			"manager's own image": func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example.com/attacker:latest" },
			"its fixed command":   func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"respond"} },
			"adds only NET_RAW": func(p *corev1.Pod) {
				caps := p.Spec.Containers[0].SecurityContext.Capabilities
				caps.Add = append(caps.Add, "SYS_ADMIN")
			},
			// Another identity does not make a Pod more than the probe.
			"only the probe uses the host network": func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" },
			"no priority class": func(p *corev1.Pod) {
				p.Spec.PriorityClassName = "system-cluster-critical"
			},
		}
		for why, change := range rejected {
			pod := probens.DaemonSetPod(probeDaemonSet(managerImage), "node-a")
			change(pod)
			Expect(createPod(pod)).To(MatchError(ContainSubstring(why)), why)
		}
		check := probens.DaemonSetPod(podCheckDaemonSet(), "node-a")
		check.Spec.Containers[0].Args = []string{"probe", "--namespace=" + probeNS}
		Expect(createPod(check)).To(MatchError(ContainSubstring("the pod network check runs its fixed command")))
		check = probens.DaemonSetPod(podCheckDaemonSet(), "node-a")
		check.Spec.Volumes[0].Projected.Sources = append(check.Spec.Volumes[0].Projected.Sources,
			corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "any"}}})
		Expect(createPod(check)).To(MatchError(ContainSubstring("no Secret in a projected volume")))

		By("holding a running probe Pod to its shape: no ephemeral container, no other image")
		pod := probens.DaemonSetPod(probeDaemonSet(managerImage), "node-a")
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed()) })
		debug := pod.DeepCopy()
		debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: managerImage, Args: []string{"probe", "--namespace=" + probeNS},
			SecurityContext: pod.Spec.Containers[0].SecurityContext.DeepCopy()}}}
		Expect(k8s.SubResource("ephemeralcontainers").Update(ctx, debug)).
			To(MatchError(ContainSubstring("no init or ephemeral containers")))
		swapped := pod.DeepCopy()
		swapped.Spec.Containers[0].Image = "registry.example.com/attacker:latest"
		Expect(k8s.Update(ctx, swapped, client.DryRunAll)).To(MatchError(ContainSubstring("manager's own image")))

		By("releasing a Pod of an earlier image: an update that leaves the spec alone is not evaluated")
		setManagerImage("registry.example.com/winready:v2")
		DeferCleanup(setManagerImage, managerImage)
		Eventually(func() error { return createPod(probens.DaemonSetPod(probeDaemonSet(managerImage), "node-a")) }).
			Should(MatchError(ContainSubstring("manager's own image")), "the upgraded manager's image is in force")
		relabelled := pod.DeepCopy()
		relabelled.Labels["example.com/x"] = "y"
		Expect(k8s.Update(ctx, relabelled, client.DryRunAll)).To(Succeed())
	})

	It("run only as the pod network check under its ServiceAccount", func() {
		other := podCheckDaemonSet()
		other.Name = "other"
		Eventually(func() error { return createAsManager(other) }).
			Should(MatchError(ContainSubstring("only the pod network check runs as the winready-podcheck ServiceAccount")))
		other.Spec.Template.Spec.ServiceAccountName = ""
		Expect(createAsManager(other)).To(MatchError(ContainSubstring("the only DaemonSets here are winready-probe and winready-podcheck")),
			"another DaemonSet at the restricted level, under another identity")
	})
})

var _ = Describe("ConfigMaps in the probe namespace", func() {
	It("are only the plans, of all the manager may create there", func() {
		cm := func(name string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: name}}
		}
		Eventually(func() error { return createAsManager(cm("other")) }).
			Should(MatchError(ContainSubstring("the manager writes only the plans here")))
		Expect(createAsManager(cm(probe.RoundKind.ReportName("node-a")))).To(MatchError(ContainSubstring("the manager writes only the plans here")),
			"the agents write the reports")
		Expect(createAsManager(cm(probe.RoundKind.PlanName("node-a")))).To(MatchError(ContainSubstring("its round's label")),
			"a plan carries its round")
		Expect(createAsManager(planConfigMap(probe.RoundKind, "node-a"))).To(Succeed())
		Expect(createAsManager(planConfigMap(podcheck.RoundKind, "node-a"))).To(Succeed())
	})
})

// planConfigMap is a plan of kind for node as the round engine writes it:
// labelled with its kind and round, holding the node and the plan.
func planConfigMap(k round.Kind, node string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: k.PlanName(node),
			Labels: map[string]string{round.ComponentLabel: k.Component, round.PlanLabel: "r"}},
		Data: map[string]string{round.NodeKey: node, round.PlanKey: "{}"},
	}
}
