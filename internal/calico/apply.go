package calico

import (
	"context"
	"fmt"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply makes the changes that are due, one guarded write per object, in the
// order Installation, IPAM configuration, services endpoint ConfigMap. cl
// holds the objects as read; the Installation is updated with the server's
// answer. A guard that did not hold returns ErrGuardFailed.
func Apply(ctx context.Context, c client.Client, cl *Cluster, changes []Change) error {
	byObject := map[Object][]Change{}
	for _, ch := range Due(changes) {
		byObject[ch.Object] = append(byObject[ch.Object], ch)
	}
	if cs := byObject[ObjectInstallation]; len(cs) > 0 {
		if err := InstallationPatch(cl.Installation, cs).Apply(ctx, c, cl.Installation); err != nil {
			return err
		}
	}
	if cs := byObject[ObjectIPAMConfig]; len(cs) > 0 {
		if err := applyIPAMConfig(ctx, c, cl, cs); err != nil {
			return err
		}
	}
	if cs := byObject[ObjectServicesEndpoint]; len(cs) > 0 {
		return applyServicesEndpoint(ctx, c, cl, cs)
	}
	return nil
}

// InstallationPatch is the guarded JSON patch that makes the changes of the
// Installation and claims it (ClaimLabel): each replaced or removed value is
// tested first, an added field or an opaque structure is guarded by the
// generation (a new annotations map by a test that there is none), and a
// pool's index by the CIDR found at it.
func InstallationPatch(inst *operatorv1.Installation, changes []Change) *Patch {
	p := unclaimedPatch(inst, changes)
	if !p.Empty() {
		p.ops = append(p.ops, ClaimOps(inst.Labels)...)
	}
	return p
}

// ReleasePatch ends a hold that no WindowsReadiness follows any more,
// without claiming the Installation: with no WindowsReadiness admission lets
// the manager claim nothing.
func ReleasePatch(inst *operatorv1.Installation) *Patch {
	return unclaimedPatch(inst, ReleaseChange(inst))
}

// UnclaimPatch ends winready's hold of calico-node on the Installation (its
// mark) and lifts winready's claim, as a deleted WindowsReadiness goes.
func UnclaimPatch(inst *operatorv1.Installation) *Patch {
	p := unclaimedPatch(inst, ReleaseChange(inst))
	p.ops = append(p.ops, UnclaimOps(inst.Labels)...)
	return p
}

func unclaimedPatch(inst *operatorv1.Installation, changes []Change) *Patch {
	p := &Patch{}
	for _, ch := range changes {
		if strings.HasPrefix(ch.Pointer, "/spec/calicoNetwork/") {
			EnsureCalicoNetwork(p, inst)
			break
		}
	}
	for _, ch := range changes {
		if ch.Pointer == PathNodeMaxUnavailable && ch.New.Present {
			EnsureRollingUpdate(p, inst)
			break
		}
	}
	for _, ch := range changes {
		if strings.HasPrefix(ch.Pointer, "/metadata/annotations/") && ch.New.Present && inst.Annotations == nil {
			p.ops = append(p.ops, TestAbsent("/metadata/annotations"),
				PatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]any{}})
			break
		}
	}
	for _, ch := range changes {
		if ch.Pool != nil {
			p.Test(poolCIDRPointer(ch.Pointer), ch.Pool.CIDR)
		}
		switch {
		case !ch.New.Present && ch.Old.Opaque:
			p.Remove(ch.Pointer)
		case !ch.New.Present:
			p.Unset(ch.Pointer, ch.Old.any())
		default:
			p.Set(ch.Pointer, ch.Old.any(), ch.New.V)
		}
	}
	return p
}

// poolCIDRPointer is the pointer of the cidr next to a pool field's pointer.
func poolCIDRPointer(pointer string) string {
	parts := Segments(pointer)
	if i := indexSegment(parts); i >= 0 {
		return "/" + strings.Join(append(parts[:i+1:i+1], "cidr"), "/")
	}
	return pointer
}

// applyIPAMConfig sets strictAffinity, creating the configuration when it is
// absent, or deletes the configuration.
func applyIPAMConfig(ctx context.Context, c client.Client, cl *Cluster, changes []Change) error {
	for _, ch := range changes {
		switch {
		case ch.Pointer == "" && !ch.New.Present:
			if cl.IPAMConfig == nil {
				return nil
			}
			return DeleteIPAMConfig(ctx, c, cl.IPAMConfig)
		case ch.Pointer == PathStrictAffinity:
			strict, _ := ch.New.V.(bool)
			return SetStrictAffinity(ctx, c, cl.IPAMConfig, strict)
		}
	}
	return fmt.Errorf("no write for the IPAM configuration changes %v", changes)
}

// applyServicesEndpoint writes the ConfigMap's keys, creating it when absent,
// or deletes it.
func applyServicesEndpoint(ctx context.Context, c client.Client, cl *Cluster, changes []Change) error {
	want := map[string]string{}
	for _, ch := range changes {
		if ch.Pointer == "" && !ch.New.Present {
			if cl.ServicesEndpoint == nil {
				return nil
			}
			return DeleteServicesEndpoint(ctx, c, cl.ServicesEndpoint)
		}
		parts := Segments(ch.Pointer)
		v, _ := ch.New.V.(string)
		want[parts[len(parts)-1]] = v
	}
	return SetServicesEndpoint(ctx, c, cl.ServicesEndpoint, want)
}
