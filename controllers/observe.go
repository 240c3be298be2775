package controllers

import (
	"context"

	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/internal/calico"
)

// observeCalico reads, once per pass, what every later sub-reconciler decides
// from: the Windows nodes and the Tigera operator's health, both from the
// manager's cache.
type observeCalico struct{ *Reconciler }

func (r observeCalico) reconcile(ctx context.Context, s *scope) Outcome {
	// From the cache (Nodes as metadata): this runs on every pass. A
	// rollback looks again past the cache right before each of its writes
	// (walk.mayChangeNow), where a node that registered a moment ago counts.
	names, err := windowsNodes(ctx, r.Client)
	if err != nil {
		return failed(err)
	}
	s.windowsNodes = names
	s.wr.Status.WindowsNodes = names[:min(len(names), maxListedNodes)]
	if err := r.observeCalicoHealth(ctx, s); err != nil {
		return failed(err)
	}
	return done()
}

// observeCalicoHealth reads TigeraStatus calico and ippools, and
// calico-windows once the Installation asks for HNS, and the overlay: it
// remembers the first Degraded one for calicoBlocked and for CalicoHealthy
// (writeCalicoHealthy, at the end of the pass), and every Degraded one for
// the message of a wait.
func (r observeCalico) observeCalicoHealth(ctx context.Context, s *scope) error {
	overlay, err := calico.GetOverlay(ctx, r.Client)
	if err != nil {
		return err
	}
	// An overlay written after the preflight wins over what the steps write:
	// a wait then names it, since the operator reports nothing Degraded.
	h := calicoHealth{overlay: overlay, overlayConflicts: calico.OverlayConflicts(overlay)}
	names := []string{calico.StatusCalico, calico.StatusIPPools}
	// calico-windows keeps its last status when Windows is turned off: only
	// while the Installation asks for HNS does it speak for the cluster.
	if calico.Deref(calico.WindowsDataplane(s.inst)) == string(operatorv1.WindowsDataplaneHNS) {
		names = append(names, calico.StatusCalicoWindows)
	}
	h.read = map[string]calico.Health{}
	for _, name := range names {
		st, err := calico.ReadHealth(ctx, r.Client, name)
		if err != nil {
			return err
		}
		h.read[name] = st
		if !st.Degraded {
			continue
		}
		h.operatorDegraded = append(h.operatorDegraded, st)
		if h.degraded == nil && name != calico.StatusCalicoWindows {
			h.degraded = &st
		}
	}
	s.calico = h
	return nil
}
