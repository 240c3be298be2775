package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/detect"
)

// targets decides the values the migration writes: the spec's overrides,
// else what the cluster already holds (so nothing is changed that was not
// asked for), else what is detected. They are decided again when what they
// were decided from changes (targetsDigests): spec.serviceCIDRs or
// spec.apiServer, or, before the first change, the values the cluster
// holds; a spec edit of anything else keeps them. A value that cannot be
// found, or an API server address that fails its proof, stops the
// migration before it is written.
type targets struct{ *Reconciler }

func (r targets) reconcile(ctx context.Context, s *scope) Outcome {
	existing, err := calico.GetServicesEndpoint(ctx, r.Client)
	if err != nil {
		return failed(err)
	}
	spec, cluster, err := targetsDigests(s, existing)
	if err != nil {
		return failed(err)
	}
	if t := s.wr.Status.Targets; t != nil && resolvedFor(s, t, spec, cluster) {
		return done()
	}
	t, err := detect.Targets(ctx, r.APIReader, s.wr.Spec, s.inst, existing)
	if errors.Is(err, detect.ErrNotFound) {
		return stop(conditions.ReasonDetectionFailed, "cannot find the %v", err)
	}
	if err != nil {
		return failed(err)
	}
	proven, o := r.proveAPIServer(ctx, s, t, existing)
	if !o.Done() {
		return o
	}
	t.Generation, t.InputDigest, t.ClusterDigest = s.wr.Generation, spec, cluster
	s.wr.Status.Targets = t

	if (detect.Endpoint{Host: t.APIServerHost}).IsAddress() {
		s.set(conditions.DirectAPIServerAddress, metav1.ConditionTrue, conditions.ReasonAddress,
			fmt.Sprintf("calico-node will reach the API server at %s:%s%s", t.APIServerHost, t.APIServerPort, proven))
	} else {
		s.set(conditions.DirectAPIServerAddress, metav1.ConditionFalse, conditions.ReasonHostname,
			fmt.Sprintf("%s is a DNS name: a fresh Calico install can deadlock waiting for DNS (tigera/operator#3615); prefer an address in spec.apiServer.host%s", t.APIServerHost, proven))
	}
	return done()
}

// resolvedFor says whether t were resolved from the spec fields and cluster
// values whose digests are spec and cluster. Once the migration goes on from
// its record, the cluster holds the values it wrote, or someone's revert of
// them, which is the steps' to see: only the spec moves the targets then.
// Targets resolved by a winready that keyed them on the spec's generation
// stand for that generation and get the digests.
func resolvedFor(s *scope, t *v1alpha1.Targets, spec, cluster string) bool {
	switch {
	case t.InputDigest == "" && t.Generation == s.wr.Generation:
		t.InputDigest, t.ClusterDigest = spec, cluster
		return true
	case t.InputDigest != spec:
		return false
	}
	return s.adopted() || t.ClusterDigest == cluster
}

// proveAPIServer proves the address winready is about to write into the
// services endpoint ConfigMap with a TLS handshake verified against the
// cluster CA (ConfigMap kube-root-ca.crt in winready's namespace) for that
// host, so that a typo, another cluster's endpoint or a hostile edit of the
// spec never reaches calico-node on every node. An address the ConfigMap
// already holds is not written and not proven. It returns what to add to the
// DirectAPIServerAddress message, or the outcome that stops on an address
// that failed.
func (r targets) proveAPIServer(ctx context.Context, s *scope, t *v1alpha1.Targets, existing *corev1.ConfigMap) (string, Outcome) {
	if existing != nil && existing.Data[calico.ServiceHostKey] == t.APIServerHost && existing.Data[calico.ServicePortKey] == t.APIServerPort {
		return "", done()
	}
	ns := r.opts.Namespace
	ca := &corev1.ConfigMap{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: detect.RootCAConfigMap}, ca)
	switch {
	case apierrors.IsNotFound(err) || err == nil && ca.Data[detect.RootCAKey] == "":
		// Kubernetes publishes it in every namespace; without it there is
		// nothing to verify against, and the condition says so.
		return fmt.Sprintf(" (not proven: ConfigMap %s/%s holds no cluster CA)", ns, detect.RootCAConfigMap), done()
	case err != nil:
		return "", failed(fmt.Errorf("reading the cluster CA: %w", err))
	}
	if err := detect.Prove(ctx, t.APIServerHost, t.APIServerPort, []byte(ca.Data[detect.RootCAKey])); err != nil {
		msg := fmt.Sprintf("the API server address %s:%s (%s) failed the TLS check against the cluster CA (ConfigMap %s/%s): %v. "+
			"Nothing was changed; set spec.apiServer to an address of this cluster's API server whose serving certificate the "+
			"cluster CA signs for that host", t.APIServerHost, t.APIServerPort, t.Source, ns, detect.RootCAConfigMap, err)
		s.set(conditions.DirectAPIServerAddress, metav1.ConditionFalse, conditions.ReasonAPIServerAddressUnproven, msg)
		return "", stop(conditions.ReasonAPIServerAddressUnproven, "%s", msg)
	}
	return "; its TLS certificate is verified against the cluster CA", done()
}
