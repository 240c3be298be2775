package calicosim

import (
	"context"
	"fmt"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serviceEndpoint is the API server address from ConfigMap tigera-operator/kubernetes-services-endpoint.
type serviceEndpoint struct{ host, port string }

func endpointFrom(cm *corev1.ConfigMap) serviceEndpoint {
	if cm == nil {
		return serviceEndpoint{}
	}
	return serviceEndpoint{host: cm.Data[envServiceHost], port: cm.Data[envServicePort]}
}

// podEnvironment is the API server address the operator's pod starts with: the kubernetes Service's (the
// kubelet's service environment), with each key the ConfigMap holds put over it, as the operator Deployment's
// optional envFrom of the ConfigMap does at pod start.
func podEnvironment(ctx context.Context, r client.Reader, cm *corev1.ConfigMap) (serviceEndpoint, error) {
	var ep serviceEndpoint
	svc := &corev1.Service{}
	err := r.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc)
	if client.IgnoreNotFound(err) != nil {
		return serviceEndpoint{}, err
	}
	if err == nil && svc.Spec.ClusterIP != "" && len(svc.Spec.Ports) > 0 {
		ep = serviceEndpoint{host: svc.Spec.ClusterIP, port: fmt.Sprint(svc.Spec.Ports[0].Port)}
	}
	if cm != nil {
		if v, ok := cm.Data[envServiceHost]; ok {
			ep.host = v
		}
		if v, ok := cm.Data[envServicePort]; ok {
			ep.port = v
		}
	}
	return ep, nil
}

// envVars is k8sapi.ServiceEndpoint.EnvVars: both values or nothing.
func (e serviceEndpoint) envVars() []corev1.EnvVar {
	if e.host == "" || e.port == "" {
		return nil
	}
	return []corev1.EnvVar{{Name: envServiceHost, Value: e.host}, {Name: envServicePort, Value: e.port}}
}

// renderCalicoNode renders calico-system/calico-node as pkg/render/node.go would, reduced to what a migration
// can observe: the env that BGP and the services endpoint decide, and the readiness probe that stops checking BIRD
// when BGP is off. Anything that changes here changes the pod template, and so rolls calico-node out.
func renderCalicoNode(spec *operatorv1.InstallationSpec, ep serviceEndpoint) *appsv1.DaemonSet {
	clusterType, backend := "k8s,operator", "vxlan"
	readiness := []string{"/bin/calico-node", "-felix-ready"}
	if bgpEnabled(spec) {
		clusterType += ",bgp"
		backend = "bird"
		readiness = []string{"/bin/calico-node", "-bird-ready", "-felix-ready"}
	}
	env := []corev1.EnvVar{
		{Name: "DATASTORE_TYPE", Value: "kubernetes"},
		{Name: "WAIT_FOR_DATASTORE", Value: "true"},
		{Name: "CLUSTER_TYPE", Value: clusterType},
		{Name: "CALICO_DISABLE_FILE_LOGGING", Value: "false"},
		{Name: "FELIX_DEFAULTENDPOINTTOHOSTACTION", Value: "ACCEPT"},
		{Name: "FELIX_HEALTHENABLED", Value: "true"},
		{Name: "FELIX_HEALTHPORT", Value: "9099"},
		fieldEnv("NODENAME", "spec.nodeName"),
		fieldEnv("NAMESPACE", "metadata.namespace"),
		{Name: "FELIX_TYPHAK8SNAMESPACE", Value: calicoNamespace},
		{Name: "FELIX_TYPHAK8SSERVICENAME", Value: "calico-typha"},
		{Name: "CALICO_MANAGE_CNI", Value: "true"},
		{Name: "CALICO_NETWORKING_BACKEND", Value: backend},
		{Name: "IP", Value: "autodetect"},
		{Name: "IP_AUTODETECTION_METHOD", Value: "first-found"},
		{Name: "IP6", Value: "none"},
		{Name: "FELIX_IPV6SUPPORT", Value: "false"},
	}
	env = append(env, ep.envVars()...)
	container := corev1.Container{
		Name:  nodeContainer,
		Image: calicoImage,
		Env:   env,
		LivenessProbe: &corev1.Probe{
			ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "localhost", Path: "/liveness", Port: intstr.FromInt32(9099)}},
			TimeoutSeconds: 10,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:   corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: readiness}},
			PeriodSeconds:  10,
			TimeoutSeconds: 5,
		},
	}
	installCNI := corev1.Container{
		Name:  "install-cni",
		Image: "quay.io/calico/cni:v3.32.0",
		Env: append([]corev1.EnvVar{
			{Name: "CNI_CONF_NAME", Value: "10-calico.conflist"},
			{Name: "SLEEP", Value: "false"},
			{Name: "CNI_NET_DIR", Value: "/etc/cni/net.d"},
		}, ep.envVars()...),
	}
	return daemonSet(nodeDaemonSet, "linux", spec, []corev1.Container{installCNI}, []corev1.Container{container})
}

// renderCalicoNodeWindows renders calico-system/calico-node-windows as pkg/render/windows.go would, reduced the
// same way: the CNI installer gets the service CIDRs, DNS servers and VNI, the node and felix containers the
// networking backend, the VNI and the services endpoint.
func renderCalicoNodeWindows(spec *operatorv1.InstallationSpec, ep serviceEndpoint, dnsIPs []string, vxlanVNI int) *appsv1.DaemonSet {
	backend := "vxlan"
	if bgpEnabled(spec) {
		backend = "windows-bgp"
	}
	cniNetDir := windowsCNIConfigDir
	if spec.WindowsNodes != nil && spec.WindowsNodes.CNIConfigDir != "" {
		cniNetDir = spec.WindowsNodes.CNIConfigDir
	}
	vni := fmt.Sprintf("%d", vxlanVNI)
	installCNI := corev1.Container{
		Name:  "install-cni",
		Image: cniWindowsImage,
		Env: append([]corev1.EnvVar{
			{Name: "SLEEP", Value: "false"},
			{Name: "CNI_PLUGIN_TYPE", Value: string(operatorv1.PluginCalico)},
			{Name: "CNI_BIN_DIR", Value: "/host/opt/cni/bin"},
			{Name: "CNI_CONF_NAME", Value: "10-calico.conflist"},
			{Name: "CNI_NET_DIR", Value: cniNetDir},
			{Name: "KUBERNETES_DNS_SERVERS", Value: strings.Join(dnsIPs, ",")},
			{Name: "KUBERNETES_SERVICE_CIDRS", Value: strings.Join(spec.ServiceCIDRs, ",")},
			{Name: "VXLAN_VNI", Value: vni},
			fieldEnv("KUBERNETES_NODE_NAME", "spec.nodeName"),
		}, ep.envVars()...),
	}
	nodeEnv := append([]corev1.EnvVar{
		{Name: "DATASTORE_TYPE", Value: "kubernetes"},
		{Name: "WAIT_FOR_DATASTORE", Value: "true"},
		{Name: "CALICO_NETWORKING_BACKEND", Value: backend},
		fieldEnv("NODENAME", "spec.nodeName"),
		{Name: "VXLAN_VNI", Value: vni},
		{Name: "VXLAN_ADAPTER", Value: ""},
		{Name: "KUBERNETES_SERVICE_CIDRS", Value: strings.Join(spec.ServiceCIDRs, ",")},
		{Name: "CALICO_MANAGE_CNI", Value: "true"},
		{Name: "KUBE_NETWORK", Value: "Calico.*"},
	}, ep.envVars()...)
	containers := []corev1.Container{
		{Name: "node", Image: calicoWindowsImage, Env: nodeEnv},
		{Name: "felix", Image: calicoWindowsImage, Env: nodeEnv},
	}
	return daemonSet(windowsDaemonSet, "windows", spec, []corev1.Container{installCNI}, containers)
}

func daemonSet(name, os string, spec *operatorv1.InstallationSpec, initContainers, containers []corev1.Container) *appsv1.DaemonSet {
	labels := map[string]string{appLabel: name}
	strategy := *spec.NodeUpdateStrategy.DeepCopy()
	if strategy.Type == "" {
		strategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: calicoNamespace, Labels: map[string]string{appLabel: name}},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: strategy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:       map[string]string{osLabel: os},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					ServiceAccountName: name,
					HostNetwork:        name == nodeDaemonSet,
					InitContainers:     initContainers,
					Containers:         containers,
				},
			},
		},
	}
}

// fieldEnv names the API version explicitly: the API server would default it, and a template that differs from
// the stored one only by a default would be rewritten on every reconcile.
func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

// applyDaemonSet creates want, or updates the stored DaemonSet when the parts of the template the simulator
// renders differ. Only a real change is written, so the API server bumps metadata.generation (and calico-node
// rolls out) exactly when the operator's would.
func (s *Simulator) applyDaemonSet(ctx context.Context, want *appsv1.DaemonSet) error {
	cur := &appsv1.DaemonSet{}
	if err := s.reader.Get(ctx, client.ObjectKeyFromObject(want), cur); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		return s.create(ctx, want)
	}
	if templateMatches(&cur.Spec.Template.Spec, &want.Spec.Template.Spec) && strategyMatches(cur.Spec.UpdateStrategy, want.Spec.UpdateStrategy) {
		return nil
	}
	if cur.Annotations[ignoreAnnotation] == "true" {
		// The component handler renders the object and leaves the stored one as it is (component.go).
		return nil
	}
	// The Installation's nodeUpdateStrategy is copied as the operator's render does: a change of it alone bumps
	// the generation but leaves the template, so no pod is replaced.
	cur.Spec.UpdateStrategy = want.Spec.UpdateStrategy
	if !templateMatches(&cur.Spec.Template.Spec, &want.Spec.Template.Spec) {
		cur.Spec.Template.Spec.NodeSelector = want.Spec.Template.Spec.NodeSelector
		cur.Spec.Template.Spec.InitContainers = want.Spec.Template.Spec.InitContainers
		cur.Spec.Template.Spec.Containers = want.Spec.Template.Spec.Containers
	}
	return s.update(ctx, cur)
}

// strategyMatches compares the strategy type and maxUnavailable, which the Installation sets; maxSurge is the API
// server's default.
func strategyMatches(cur, want appsv1.DaemonSetUpdateStrategy) bool {
	if cur.Type != want.Type {
		return false
	}
	var c, w *intstr.IntOrString
	if cur.RollingUpdate != nil {
		c = cur.RollingUpdate.MaxUnavailable
	}
	if want.RollingUpdate != nil {
		w = want.RollingUpdate.MaxUnavailable
	}
	return w == nil || (c != nil && *c == *w)
}

// templateMatches compares what the simulator renders and nothing the API server defaults.
func templateMatches(cur, want *corev1.PodSpec) bool {
	if !equality.Semantic.DeepEqual(cur.NodeSelector, want.NodeSelector) {
		return false
	}
	return containersMatch(cur.InitContainers, want.InitContainers) && containersMatch(cur.Containers, want.Containers)
}

func containersMatch(cur, want []corev1.Container) bool {
	if len(cur) != len(want) {
		return false
	}
	for i := range want {
		c, w := cur[i], want[i]
		if c.Name != w.Name || c.Image != w.Image || !equality.Semantic.DeepEqual(c.Env, w.Env) {
			return false
		}
		if probeCommand(c.ReadinessProbe) != probeCommand(w.ReadinessProbe) {
			return false
		}
	}
	return true
}

func probeCommand(p *corev1.Probe) string {
	if p == nil || p.Exec == nil {
		return ""
	}
	return strings.Join(p.Exec.Command, " ")
}

// EnvValue returns the value of env var name in any container or init container of ds's pod template, for tests
// that check what the simulated operator rendered.
func EnvValue(ds *appsv1.DaemonSet, name string) (string, bool) {
	spec := ds.Spec.Template.Spec
	for _, c := range append(append([]corev1.Container{}, spec.Containers...), spec.InitContainers...) {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value, true
			}
		}
	}
	return "", false
}

func daemonSetKey(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: calicoNamespace, Name: name}
}
