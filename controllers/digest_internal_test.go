package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// digests are the digests of one pass: the preflight's, the targets' spec
// and cluster parts, and the probe's.
type digests struct{ preflight, targets, cluster, probe string }

func digestsOf(t *testing.T, c client.Client, s *scope) digests {
	t.Helper()
	var d digests
	r := &Reconciler{Client: c}
	endpoint, err := calico.GetServicesEndpoint(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if d.preflight, err = r.preflightDigest(context.Background(), s, endpoint); err != nil {
		t.Fatal(err)
	}
	if d.targets, d.cluster, err = targetsDigests(s, endpoint); err != nil {
		t.Fatal(err)
	}
	if d.probe, err = probeDigest(s); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestEachDigestCoversWhatItsPartReads: a spec edit changes the digests of
// the parts that read the field edited, and no other; a change of the
// cluster, those of the parts that read it.
func TestEachDigestCoversWhatItsPartReads(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "linux-0", Labels: map[string]string{calico.OSLabel: "linux"}}}
	type changed struct{ preflight, targets, cluster, probe bool }
	for _, tc := range []struct {
		name string
		edit func(*scope)
		// cluster is an object the cluster gets besides linux-0.
		cluster client.Object
		want    changed
	}{
		{"paused", func(s *scope) { s.wr.Spec.Paused = true }, nil, changed{}},
		{"an approval", func(s *scope) { s.wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation} }, nil, changed{}},
		{"requireApproval, dryRun, conservative, the pod network check", func(s *scope) {
			s.wr.Spec.RequireApproval, s.wr.Spec.DryRun, s.wr.Spec.Rollout.Conservative = true, true, true
			s.wr.Spec.PodNetworkCheck.Disabled = true
		}, nil, changed{}},
		{"an acknowledgement", func(s *scope) {
			s.wr.Spec.Preflight.Acknowledge = []v1alpha1.Acknowledgement{v1alpha1.AcknowledgeBGPPeers}
		}, nil, changed{preflight: true}},
		{"the expected Windows nodes", func(s *scope) {
			s.wr.Spec.WindowsNodes = &v1alpha1.WindowsNodesSpec{Expected: ptr.To[int32](10)}
		}, nil, changed{preflight: true}},
		{"spec.serviceCIDRs", func(s *scope) { s.wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{"10.96.0.0/12"} }, nil,
			// The Installation's serviceCIDRs no longer count: it held none.
			changed{targets: true}},
		{"spec.apiServer", func(s *scope) { s.wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.10", Port: 6443} }, nil,
			changed{preflight: true, targets: true}},
		{"extra probe targets", func(s *scope) { s.wr.Spec.Preflight.ExtraTargets = []v1alpha1.IPv4Address{"10.1.0.5"} }, nil,
			changed{probe: true}},
		{"the probe's timeout", func(s *scope) { s.wr.Spec.Preflight.ProbeTimeout = &metav1.Duration{Duration: time.Minute} }, nil,
			changed{probe: true}},
		{"the probe's timeout, set to its default", func(s *scope) {
			s.wr.Spec.Preflight.ProbeTimeout = &metav1.Duration{Duration: DefaultProbeTimeout}
		}, nil, changed{}},
		{"the Installation's service network", func(s *scope) { s.inst.Spec.ServiceCIDRs = []string{"10.96.0.0/12"} }, nil,
			changed{preflight: true, cluster: true}},
		{"the Calico version", func(s *scope) { s.inst.Status.CalicoVersion = "v3.31.0" }, nil, changed{preflight: true}},
		{"the services-endpoint ConfigMap", nil, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap},
			Data:       map[string]string{calico.ServiceHostKey: "10.0.0.10", calico.ServicePortKey: "6443"}},
			changed{preflight: true, cluster: true}},
		{"a Node", nil, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "linux-1", Labels: map[string]string{calico.OSLabel: "linux"}}},
			changed{preflight: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := passOver()
			before.inst = &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node.DeepCopy()).Build()
			was := digestsOf(t, c, before)

			after := passOver()
			after.inst = before.inst.DeepCopy()
			after.wr.Generation++
			if tc.edit != nil {
				tc.edit(after)
			}
			if tc.cluster != nil {
				if err := c.Create(context.Background(), tc.cluster); err != nil {
					t.Fatal(err)
				}
			}
			is := digestsOf(t, c, after)
			got := changed{was.preflight != is.preflight, was.targets != is.targets, was.cluster != is.cluster, was.probe != is.probe}
			if got != tc.want {
				t.Errorf("changed %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestAPassingVerdictHoldsForTheSameInputsAlone: the manager takes its
// passing verdict again for the same object, inputs and rerun request
// within the retry interval; never a failed one.
func TestAPassingVerdictHoldsForTheSameInputsAlone(t *testing.T) {
	now := time.Now()
	passed := []v1alpha1.PreflightCheck{{Name: "IPIPPools", Result: v1alpha1.CheckPass}, {Name: "NodePolicies", Result: v1alpha1.CheckWarn}}
	var s seen
	s.judgedPreflight(preflightVerdict{uid: "a", digest: "d", token: "", checks: passed, at: now})
	for _, tc := range []struct {
		name          string
		uid           string
		digest, token string
		after         time.Duration
		holds         bool
	}{
		{"the same inputs, a minute on", "a", "d", "", time.Minute, true},
		{"another object", "b", "d", "", 0, false},
		{"other inputs", "a", "e", "", 0, false},
		{"a rerun asked for", "a", "d", "t", 0, false},
		{"as old as the retry interval", "a", "d", "", DefaultPreflightRetry, false},
	} {
		checks, ok := s.preflightHolds(types.UID(tc.uid), tc.digest, tc.token, now.Add(tc.after), DefaultPreflightRetry)
		if ok != tc.holds || ok && len(checks) != len(passed) {
			t.Errorf("%s: holds %v (%v), want %v", tc.name, ok, checks, tc.holds)
		}
	}
	failed := slices.Concat(passed, []v1alpha1.PreflightCheck{{Name: "BGPPeers", Result: v1alpha1.CheckFail}})
	s.judgedPreflight(preflightVerdict{uid: "a", digest: "d", checks: failed, at: now})
	if _, ok := s.preflightHolds("a", "d", "", now, DefaultPreflightRetry); ok {
		t.Error("a failed verdict is taken again: a fix would go unseen until the inputs change")
	}
}
