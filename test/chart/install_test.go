package chart

import (
	"cmp"
	"context"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// TestTheChartInstalls applies what the chart renders to a real API server,
// with default values and then, as a helm upgrade would, with the values a
// platform team sets: every object is admitted (server-side apply refuses a
// field the schema lacks), and the manager's Deployment as stored carries
// the values, its image and WINREADY_IMAGE the same.
func TestTheChartInstalls(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset: make chart-test sets it to the envtest control plane")
	}
	dir, pinned := release(t)
	c := loadChart(t, dir)
	ctx := t.Context()
	k8s := startAPIServer(t)
	// winready's Roles live in Calico's namespaces, which a Calico install
	// made before winready's.
	for _, ns := range []string{"calico-system", "tigera-operator"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	const mirrorRegistry, mirrorRepository = "registry.example.com", "mirror/winready"
	const mirror = mirrorRegistry + "/" + mirrorRepository
	const mirrorDigest = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	for _, tc := range []struct {
		name   string
		values string
		want   managerSpec
	}{{
		name: "default values",
		want: managerSpec{
			image:        registry() + "/winready@" + pinned,
			replicas:     2,
			nodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		},
	}, {
		name: "a platform team's values",
		values: `
image: {registry: ` + mirrorRegistry + `, repository: ` + mirrorRepository + `, digest: "` + mirrorDigest + `"}
imagePullSecrets: [{name: mirror-creds}]
podLabels: {team: platform}
podAnnotations: {example.com/owner: platform}
extraArgs: [--zap-log-level=debug]
extraEnv: [{name: HTTPS_PROXY, value: "http://proxy.example.com:3128"}]
replicas: 3
nodeSelector: {kubernetes.io/os: linux, node-role.kubernetes.io/infra: ""}
tolerations: [{key: node-role.kubernetes.io/infra, operator: Exists, effect: NoSchedule}]
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 512Mi}}
serviceMonitor: {enabled: false}
`,
		want: managerSpec{
			image:        mirror + "@" + mirrorDigest,
			replicas:     3,
			nodeSelector: map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/infra": ""},
			tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/infra", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoSchedule}},
			resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
			pullSecrets:    []corev1.LocalObjectReference{{Name: "mirror-creds"}},
			podLabels:      map[string]string{"team": "platform"},
			podAnnotations: map[string]string{"example.com/owner": "platform"},
			extraArg:       "--zap-log-level=debug",
			extraEnv:       &corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.example.com:3128"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			objs := renderChart(t, c, values)
			applyAll(t, ctx, k8s, objs)
			for _, o := range objs {
				u := &unstructured.Unstructured{Object: o}
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(u.GroupVersionKind())
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
					t.Errorf("%s after the apply: %v", key(o), err)
				}
				if u.GetKind() == "ServiceMonitor" || u.GetKind() == "PrometheusRule" {
					t.Errorf("%s rendered with its value off", key(o))
				}
			}
			dep := &appsv1.Deployment{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: "winready-system", Name: "winready-manager"}, dep); err != nil {
				t.Fatal(err)
			}
			tc.want.check(t, dep)
		})
	}
}

// managerSpec is what the values set in the manager's Deployment.
type managerSpec struct {
	image        string
	replicas     int32
	nodeSelector map[string]string
	tolerations  []corev1.Toleration
	// resources nil: config/default's.
	resources *corev1.ResourceRequirements
	// What the values add: nothing when unset.
	pullSecrets    []corev1.LocalObjectReference
	podLabels      map[string]string
	podAnnotations map[string]string
	extraArg       string
	extraEnv       *corev1.EnvVar
}

func (want managerSpec) check(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == "manager" })
	if i < 0 {
		t.Fatalf("the Deployment as stored has no manager container: %s", asJSON(pod.Containers))
	}
	manager := pod.Containers[i]
	env := ""
	for _, e := range manager.Env {
		if e.Name == "WINREADY_IMAGE" {
			env = e.Value
		}
	}
	if manager.Image != want.image || env != want.image {
		t.Errorf("image %q, WINREADY_IMAGE %q: want both %q", manager.Image, env, want.image)
	}
	if got := dep.Spec.Replicas; got == nil || *got != want.replicas {
		t.Errorf("replicas %v, want %d", asJSON(got), want.replicas)
	}
	if !reflect.DeepEqual(pod.NodeSelector, want.nodeSelector) {
		t.Errorf("nodeSelector %v, want %v", pod.NodeSelector, want.nodeSelector)
	}
	if !reflect.DeepEqual(pod.Tolerations, want.tolerations) {
		t.Errorf("tolerations %s, want %s", asJSON(pod.Tolerations), asJSON(want.tolerations))
	}
	if want.resources != nil && !equalResources(manager.Resources, *want.resources) {
		t.Errorf("resources %s, want %s", asJSON(manager.Resources), asJSON(want.resources))
	}
	if !reflect.DeepEqual(pod.ImagePullSecrets, want.pullSecrets) {
		t.Errorf("imagePullSecrets %s, want %s", asJSON(pod.ImagePullSecrets), asJSON(want.pullSecrets))
	}
	// The selector's labels stay; podLabels come beside them.
	labels := map[string]string{"app.kubernetes.io/name": "winready", "app.kubernetes.io/component": "manager"}
	maps.Copy(labels, want.podLabels)
	if got := dep.Spec.Template.Labels; !reflect.DeepEqual(got, labels) {
		t.Errorf("pod labels %v, want %v", got, labels)
	}
	if got := dep.Spec.Template.Annotations; len(got) != len(want.podAnnotations) || len(got) > 0 && !reflect.DeepEqual(got, want.podAnnotations) {
		t.Errorf("pod annotations %v, want %v", got, want.podAnnotations)
	}
	// extraArgs come after the manager's own, which stay.
	if !slices.Contains(manager.Args, "--leader-elect") || want.extraArg != "" && manager.Args[len(manager.Args)-1] != want.extraArg ||
		want.extraArg == "" && slices.ContainsFunc(manager.Args, func(a string) bool { return strings.HasPrefix(a, "--zap") }) {
		t.Errorf("args %v, want the manager's and then %q", manager.Args, want.extraArg)
	}
	if want.extraEnv != nil && !slices.Contains(manager.Env, *want.extraEnv) {
		t.Errorf("env %s lacks %s", asJSON(manager.Env), asJSON(want.extraEnv))
	}
	if want.extraEnv == nil && len(manager.Env) != 1 {
		t.Errorf("env %s: want WINREADY_IMAGE alone", asJSON(manager.Env))
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	same := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for name, q := range x {
			if q.Cmp(y[name]) != 0 {
				return false
			}
		}
		return true
	}
	return same(a.Requests, b.Requests) && same(a.Limits, b.Limits)
}

// startEnv starts envtest's kube-apiserver and etcd, with nothing
// installed, stopped when the test ends.
//
// It builds its environment itself, where winready's other suites take
// test/kit's (kit.Environment with NoCalicoCRDs and NoWinreadyCRD is the
// same control plane): test/chart is a module of its own, which keeps the
// Helm SDK out of winready's module and requires nothing of winready's;
// test/kit would bring in winready's module, Calico's and the Tigera
// operator's.
func startEnv(t *testing.T) *envtest.Environment {
	t.Helper()
	env := &envtest.Environment{}
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return env
}

// startAPIServer starts the API server (startEnv) and returns an uncached
// client of it.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	k8s, err := client.New(startEnv(t).Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return k8s
}

// applyAll applies objs as helm install does them, with server-side apply:
// the CRDs (crds/) first, each established before the rest, then the
// Namespaces, then everything else.
func applyAll(t *testing.T, ctx context.Context, k8s client.Client, objs []map[string]any) {
	t.Helper()
	rank := func(o map[string]any) int {
		switch o["kind"] {
		case "CustomResourceDefinition":
			return 0
		case "Namespace":
			return 1
		}
		return 2
	}
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b map[string]any) int { return cmp.Compare(rank(a), rank(b)) })
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s: %v", key(o), err)
		}
		if u.GetKind() == "CustomResourceDefinition" {
			waitEstablished(t, ctx, k8s, u.GetName())
		}
	}
}

func waitEstablished(t *testing.T, ctx context.Context, k8s client.Client, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			if c, _ := c.(map[string]any); c["type"] == "Established" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not established: %v", name, err)
	}
}
