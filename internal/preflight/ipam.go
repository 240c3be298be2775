package preflight

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

func borrowed(in Inputs) v1alpha1.PreflightCheck {
	if in.BlocksUnreadable {
		return result(CheckBorrowed, v1alpha1.CheckInfo, "IPAM blocks are served neither by projectcalico.org/v3 nor by crd.projectcalico.org/v1: borrowed addresses not checked")
	}
	if len(in.Borrowed) == 0 {
		return result(CheckBorrowed, v1alpha1.CheckPass, "no node uses addresses from another node's block")
	}
	nodes := make([]string, 0, len(in.Borrowed))
	total := 0
	for n, count := range in.Borrowed {
		nodes = append(nodes, fmt.Sprintf("%s (%d)", n, count))
		total += count
	}
	slices.Sort(nodes)
	return result(CheckBorrowed, v1alpha1.CheckWarn,
		"%d addresses are borrowed from other nodes' blocks, on %s: the pool ran out of free blocks at some point, and under "+
			"strictAffinity no node borrows again; %s says whether every node can still get addresses. Do not restart those pods "+
			"to release the addresses: they may get none back", total, boundedList(nodes), CheckAffinityCapacity)
}

// poolServes says which nodes an Installation pool may give blocks to, from
// its nodeSelector: one that mentions windows is taken for Windows only, any
// other for Linux only, none (or all()) for both. The selector itself is not
// evaluated.
func poolServes(p operatorv1.IPPool) (linux, windows bool) {
	sel := strings.TrimSpace(p.NodeSelector)
	if sel == "" || sel == "all()" {
		return true, true
	}
	w := strings.Contains(sel, calico.OSWindows)
	return !w, w
}

// workloadPool reports whether new workload addresses can come from pool p:
// an enabled IPv4 pool for workloads whose block size fits its CIDR.
func workloadPool(p operatorv1.IPPool) (netip.Prefix, int32, bool) {
	prefix, err := netip.ParsePrefix(p.CIDR)
	if err != nil || !prefix.Addr().Is4() || (p.DisableNewAllocations != nil && *p.DisableNewAllocations) ||
		(len(p.AllowedUses) > 0 && !slices.Contains(p.AllowedUses, operatorv1.IPPoolAllowedUseWorkload)) {
		return netip.Prefix{}, 0, false
	}
	size := int32(defaultBlockSize)
	if p.BlockSize != nil {
		size = *p.BlockSize
	}
	prefix = prefix.Masked()
	if int(size) < prefix.Bits() || size > 32 {
		return netip.Prefix{}, 0, false
	}
	return prefix, size, true
}

// freeBlocks counts the blocks of a pool no node holds yet.
func freeBlocks(prefix netip.Prefix, size int32, blocks []netip.Prefix) (free, total int64) {
	total = int64(1) << (int(size) - prefix.Bits())
	var used int64
	for _, b := range blocks {
		if b.Bits() >= prefix.Bits() && prefix.Contains(b.Addr()) {
			used++
		}
	}
	return max(total-used, 0), total
}

// linuxDemand is what strictAffinity leaves the Linux nodes: the nodes that
// hold no affine block with a free address in a pool that serves Linux
// (each needs a free block of its own for its next pod), the free blocks of
// those pools, and how many of those free blocks Windows nodes could also
// use. Without borrowing, a node whose blocks are full gives its next pod no
// address (libcalico-go: "No more free affine blocks and strict affinity
// enabled").
func linuxDemand(in Inputs) (needing []string, linuxFree, sharedFree int64, parts []string) {
	var linuxPools []netip.Prefix
	for _, p := range calico.IPPools(in.Installation) {
		prefix, size, ok := workloadPool(p)
		linux, windows := poolServes(p)
		if !ok || !linux {
			continue
		}
		linuxPools = append(linuxPools, prefix)
		free, total := freeBlocks(prefix, size, in.BlockCIDRs)
		linuxFree += free
		if windows {
			sharedFree += free
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %d of %d blocks free", p.Name, p.CIDR, free, total))
	}
	room := map[string]bool{}
	for _, b := range in.Blocks {
		if b.Free == 0 {
			continue
		}
		for _, pool := range linuxPools {
			if pool.Contains(b.CIDR.Addr()) {
				room[b.Node] = true
			}
		}
	}
	for _, n := range in.Nodes {
		if (n.OS == "" || n.OS == "linux") && !room[n.Name] {
			needing = append(needing, n.Name)
		}
	}
	slices.Sort(needing)
	return needing, linuxFree, sharedFree, parts
}

// affinityCapacity fails when, once strictAffinity stops borrowing, some
// Linux nodes could give new pods no address: more of them need a new block
// than the pools serving them have free.
func affinityCapacity(in Inputs) v1alpha1.PreflightCheck {
	if in.BlocksUnreadable {
		return result(CheckAffinityCapacity, v1alpha1.CheckInfo, "IPAM blocks are not readable: Linux nodes' capacity under strictAffinity not checked")
	}
	needing, free, _, parts := linuxDemand(in)
	detail := strings.Join(parts, "; ")
	if detail == "" {
		detail = "no enabled IPv4 workload pool in the Installation serves Linux nodes"
	}
	if int64(len(needing)) > free {
		return result(CheckAffinityCapacity, v1alpha1.CheckFail,
			"after strictAffinity, %d Linux nodes hold no block with a free address (%s) but only %d blocks are free in the pools "+
				"that serve them (%s): without borrowing, new pods on %d of them would get no address. Add a larger or an "+
				"additional IPv4 pool (encapsulation VXLAN) to the Installation's spec.calicoNetwork.ipPools, inside the cluster's pod network "+
				"(on kubeadm the Tigera operator refuses pools outside kubeadm-config's podSubnet); restarting pods frees no block",
			len(needing), boundedList(needing), free, detail, int64(len(needing))-free)
	}
	return result(CheckAffinityCapacity, v1alpha1.CheckPass,
		"%d Linux nodes need a new block for their next pods under strictAffinity and %d are free (%s)", len(needing), free, detail)
}

// windowsIPAMCapacity compares spec.windowsNodes.expected with the free IPAM
// blocks left once the Linux nodes took theirs: with strictAffinity a Windows
// node never borrows, so each needs a block of its own in a pool that may
// serve it. No block for any Windows node fails too.
func windowsIPAMCapacity(in Inputs) v1alpha1.PreflightCheck {
	var parts, notes []string
	var free int64
	for _, p := range calico.IPPools(in.Installation) {
		poolFree, part, note := poolCapacity(p, in.BlockCIDRs)
		if note != "" {
			notes = append(notes, note)
		}
		if part != "" {
			free += poolFree
			parts = append(parts, part)
		}
	}
	detail := "no enabled IPv4 workload pool in the Installation may serve Windows nodes"
	if len(parts) > 0 {
		detail = strings.Join(parts, "; ")
	}
	if len(notes) > 0 {
		detail += "; " + strings.Join(notes, "; ")
	}
	if in.BlocksUnreadable {
		detail += "; IPAM blocks are not readable, so allocated blocks are not subtracted"
	} else if needing, linuxFree, shared, _ := linuxDemand(in); len(needing) > 0 {
		// Linux nodes draw on the pools they share with Windows nodes once
		// their own are used up.
		taken := min(max(int64(len(needing))-(linuxFree-shared), 0), shared)
		if taken > 0 {
			free -= taken
			detail += fmt.Sprintf("; %d of the shared blocks go to Linux nodes that need one (%s)", taken, CheckAffinityCapacity)
		}
	}
	if free <= 0 {
		return result(CheckIPAMCapacity, v1alpha1.CheckFail,
			"no free block is left for any Windows node (%s): with strictAffinity a Windows node needs a free block of its own and "+
				"never borrows. Add a larger or an additional IPv4 pool (encapsulation VXLAN) that may serve Windows nodes to the "+
				"Installation's spec.calicoNetwork.ipPools, inside the cluster's pod network (on kubeadm the Tigera operator refuses pools "+
				"outside kubeadm-config's podSubnet)", detail)
	}
	if in.ExpectedWindowsNodes == nil {
		return result(CheckIPAMCapacity, v1alpha1.CheckInfo,
			"%d blocks free in total, one per Windows node under strictAffinity (%s); set spec.windowsNodes.expected to check", free, detail)
	}
	expected := int64(*in.ExpectedWindowsNodes)
	if expected > free {
		return result(CheckIPAMCapacity, v1alpha1.CheckFail,
			"spec.windowsNodes.expected is %d but only %d blocks are free in total (%s). With strictAffinity each Windows node needs "+
				"a free block of its own in an enabled IPv4 pool that selects it: add such a pool (encapsulation VXLAN) to the "+
				"Installation's spec.calicoNetwork.ipPools, or lower spec.windowsNodes.expected", expected, free, detail)
	}
	return result(CheckIPAMCapacity, v1alpha1.CheckInfo, "%d blocks free in total for %d expected Windows nodes (%s)", free, expected, detail)
}

// poolCapacity counts the free blocks of an Installation pool that may serve
// Windows nodes. part describes a counted pool ("" when it is not counted);
// note says why a pool is not counted, or how it was.
func poolCapacity(p operatorv1.IPPool, blocks []netip.Prefix) (free int64, part, note string) {
	prefix, err := netip.ParsePrefix(p.CIDR)
	if err != nil || !prefix.Addr().Is4() || (p.DisableNewAllocations != nil && *p.DisableNewAllocations) ||
		(len(p.AllowedUses) > 0 && !slices.Contains(p.AllowedUses, operatorv1.IPPoolAllowedUseWorkload)) {
		return 0, "", ""
	}
	if sel := strings.TrimSpace(p.NodeSelector); sel != "" && sel != "all()" {
		if !strings.Contains(sel, calico.OSWindows) {
			return 0, "", fmt.Sprintf("%s not counted: its nodeSelector %q does not mention windows", p.Name, sel)
		}
		note = fmt.Sprintf("%s counted because its nodeSelector %q mentions windows (the selector itself is not evaluated)", p.Name, sel)
	}
	size := int32(defaultBlockSize)
	if p.BlockSize != nil {
		size = *p.BlockSize
	}
	prefix = prefix.Masked()
	if int(size) < prefix.Bits() || size > 32 {
		return 0, "", fmt.Sprintf("%s not counted: blockSize %d does not fit %s", p.Name, size, p.CIDR)
	}
	free, total := freeBlocks(prefix, size, blocks)
	return free, fmt.Sprintf("%s (%s): %d of %d blocks free, %d pods per Windows node",
		p.Name, p.CIDR, free, total, max((1<<(32-size))-reservedPerWindow, 0)), note
}
