package controllers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// The preflight, the targets and the probe round are keyed on digests of
// what they read, taken from the manager's cache on every pass, rather than
// on the spec's generation: a spec edit they do not read (paused,
// approvedSteps, acknowledge for the targets and the probe) leaves them as
// they were, and a change of the cluster they read makes them read it again.

// digestOf is a digest of the JSON of parts, one after the other (a JSON
// encoding sorts maps by key): 16 bytes in hex. The parts are streamed into
// the hash, so that thousands of Nodes are not held in one buffer.
func digestOf(parts ...any) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, p := range parts {
		if err := enc.Encode(p); err != nil {
			return "", fmt.Errorf("digesting inputs: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// Node role labels of control-plane nodes, which the LinuxWorkers check reads.
const (
	roleControlPlane = "node-role.kubernetes.io/control-plane"
	roleMaster       = "node-role.kubernetes.io/master"
)

// preflightNode is what the preflight reads of a Node that the cache holds:
// Nodes are cached as metadata, so their addresses and spec.unschedulable
// are not here.
type preflightNode struct {
	Name, OS, Tunnel string
	ControlPlane     bool
}

// preflightInputs is what the preflight's digest covers, besides the Nodes.
type preflightInputs struct {
	Installation         *operatorv1.InstallationSpec
	Labels, Annotations  map[string]string
	Variant, Version     string
	Overlay              *operatorv1.InstallationSpec
	EndpointHost         string
	EndpointPort         string
	CalicoSystem         map[string]int64
	Acknowledge          []v1alpha1.Acknowledgement
	ExpectedWindowsNodes *int32
	APIServer            *v1alpha1.APIServerEndpoint
}

// preflightDigest digests what the preflight reads that the manager's cache
// holds, and the spec fields it reads; endpoint is the services-endpoint
// ConfigMap, nil when absent.
func (r *Reconciler) preflightDigest(ctx context.Context, s *scope, endpoint *corev1.ConfigMap) (string, error) {
	in := preflightInputs{Installation: &s.inst.Spec, Labels: s.inst.Labels, Annotations: s.inst.Annotations,
		Variant: string(s.inst.Status.Variant), Version: s.inst.Status.CalicoVersion,
		Acknowledge: slices.Sorted(slices.Values(s.wr.Spec.Preflight.Acknowledge)), APIServer: s.wr.Spec.APIServer}
	if ov := s.calico.overlay; ov != nil {
		in.Overlay = &ov.Spec
	}
	if wn := s.wr.Spec.WindowsNodes; wn != nil {
		in.ExpectedWindowsNodes = wn.Expected
	}
	if endpoint != nil {
		in.EndpointHost, in.EndpointPort = endpoint.Data[calico.ServiceHostKey], endpoint.Data[calico.ServicePortKey]
	}
	sets := &appsv1.DaemonSetList{}
	if err := r.Client.List(ctx, sets, client.InNamespace(calico.SystemNamespace), client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("listing calico-system daemonsets: %w", err)
	}
	in.CalicoSystem = make(map[string]int64, len(sets.Items))
	for _, ds := range sets.Items {
		in.CalicoSystem[ds.Name] = ds.Generation
	}
	nodes, err := cachedNodes(ctx, r.Client)
	if err != nil {
		return "", err
	}
	read := make([]preflightNode, 0, len(nodes))
	for _, n := range nodes {
		_, cp := n.Labels[roleControlPlane]
		_, master := n.Labels[roleMaster]
		read = append(read, preflightNode{Name: n.Name, OS: n.Labels[calico.OSLabel],
			Tunnel: n.Annotations[calico.TunnelAnnotation], ControlPlane: cp || master})
	}
	slices.SortFunc(read, func(a, b preflightNode) int { return cmp.Compare(a.Name, b.Name) })
	parts := make([]any, 0, len(read)+1)
	parts = append(parts, in)
	for _, n := range read {
		parts = append(parts, n)
	}
	return digestOf(parts...)
}

// cachedNodes lists the Nodes from the cache, as metadata; selector narrows
// them. The items are the cache's own: the caller reads them only.
func cachedNodes(ctx context.Context, c client.Reader, selector ...client.ListOption) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := c.List(ctx, list, append(selector, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return list.Items, nil
}

// linuxNodeNames are the names of the Nodes labelled kubernetes.io/os=linux,
// the nodes a round runs on, from the cache, sorted.
func linuxNodeNames(ctx context.Context, c client.Reader) ([]string, error) {
	nodes, err := cachedNodes(ctx, c, client.MatchingLabels{calico.OSLabel: "linux"})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names, nil
}

// targetsDigests digests what the targets are resolved from: the spec
// fields (spec), and the values the cluster holds that they are taken from
// where the spec sets none (cluster); endpoint is the services-endpoint
// ConfigMap, nil when absent.
func targetsDigests(s *scope, endpoint *corev1.ConfigMap) (spec, cluster string, err error) {
	if spec, err = digestOf([]any{s.wr.Spec.ServiceCIDRs, s.wr.Spec.APIServer}); err != nil {
		return "", "", err
	}
	var held struct {
		ServiceCIDRs []string
		Host, Port   string
	}
	if len(s.wr.Spec.ServiceCIDRs) == 0 {
		held.ServiceCIDRs = s.inst.Spec.ServiceCIDRs
	}
	if s.wr.Spec.APIServer == nil && endpoint != nil && endpoint.Data[calico.ServiceHostKey] != "" && endpoint.Data[calico.ServicePortKey] != "" {
		held.Host, held.Port = endpoint.Data[calico.ServiceHostKey], endpoint.Data[calico.ServicePortKey]
	}
	cluster, err = digestOf(held)
	return spec, cluster, err
}
