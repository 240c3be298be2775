// Package probens makes what the cluster around winready makes in its probe
// namespace, for winready's suites: the Pods the DaemonSet controller makes
// of the probe's and the pod network check's DaemonSets, and the tokens the
// kubelet gives them, so that a suite can write as an agent does.
package probens

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

// saTokenVolume is the volume the ServiceAccount admission plugin adds to
// every Pod that mounts its token (envtest runs without that plugin).
const saTokenVolume = "kube-api-access-x7k2q"

// DaemonSetPod is the Pod the DaemonSet controller makes of ds on node, as
// the API server's admission leaves it before the policies: with the
// ServiceAccount token volume mounted in every container.
func DaemonSetPod(ds *appsv1.DaemonSet, node string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, GenerateName: ds.Name + "-",
			Labels: maps.Clone(ds.Spec.Template.Labels), Annotations: maps.Clone(ds.Spec.Template.Annotations)},
		Spec: *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: saTokenVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}},
	}})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: saTokenVolume, ReadOnly: true,
			MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
	}
	return pod
}

// TokenClient is a client of the API server of cfg holding a token, an hour
// long, of the ServiceAccount namespace/account that spec asks for; admin
// requests it.
func TokenClient(ctx context.Context, admin client.Client, cfg *rest.Config, namespace, account string,
	spec authenticationv1.TokenRequestSpec) (client.WithWatch, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: account}}
	spec.ExpirationSeconds = ptr.To[int64](3600)
	tr := &authenticationv1.TokenRequest{Spec: spec}
	if err := admin.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("requesting a token of %s/%s: %w", namespace, account, err)
	}
	c := rest.CopyConfig(cfg)
	c.CertData, c.KeyData, c.CertFile, c.KeyFile = nil, nil, "", ""
	c.BearerToken = tr.Status.Token
	return client.NewWithWatch(c, client.Options{Scheme: admin.Scheme()})
}

// Agent creates the Pod the DaemonSet controller makes of ds on node and
// returns it with a client holding a token bound to it, as the agent running
// there holds. The caller removes the Pod.
func Agent(ctx context.Context, admin client.Client, cfg *rest.Config, ds *appsv1.DaemonSet, node string) (client.WithWatch, *corev1.Pod, error) {
	pod := DaemonSetPod(ds, node)
	if err := admin.Create(ctx, pod); err != nil {
		return nil, nil, fmt.Errorf("creating the Pod of %s on %s: %w", ds.Name, node, err)
	}
	c, err := TokenClient(ctx, admin, cfg, ds.Namespace, ds.Spec.Template.Spec.ServiceAccountName,
		authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		})
	return c, pod, err
}

// Report is node's probe report ConfigMap in namespace claiming to be from
// claimed, done in round r, as an agent writes it.
func Report(namespace, node, claimed string) (*corev1.ConfigMap, error) {
	cm, err := round.ReportObject(probe.RoundKind, namespace, round.Report[probe.Result]{Round: "r", Node: claimed, Stage: round.Done,
		Result: probe.Result{Mode: probe.ModeCapture}})
	if err != nil {
		return nil, err
	}
	cm.Name = probe.RoundKind.ReportName(node)
	return cm, nil
}
