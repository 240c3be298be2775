package controllers

import (
	"github.com/winready/winready/api/v1alpha1"
)

// What the Tigera operator does with each step's changes, as the policy,
// the walk's batch and the riders ask it.

// rendersCalicoNode are the steps whose changes make the Tigera operator
// re-render calico-node, each a rollout over every node.
var rendersCalicoNode = []v1alpha1.StepName{v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint}

// batchable are the steps whose changes the Tigera operator applies in one
// reconcile with at most one calico-node rollout between them (README, the
// step table): BGP and the services endpoint re-render calico-node; the
// service network and the Windows dataplane change no part of calico-node's
// template (pkg/render/node.go reads neither; pkg/render/windows.go renders
// them into calico-node-windows, which runs on Windows nodes only, and none
// joins before the cluster is Ready). The operator's validation wants the
// service network with the Windows dataplane, and the first IPv4 pool VXLAN,
// which the Encapsulation step before them has settled.
var batchable = []v1alpha1.StepName{v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint,
	v1alpha1.StepServiceCIDRs, v1alpha1.StepWindowsDataplane}

// disruptive are the steps that move traffic: pools change encapsulation,
// calico-node restarts on every node.
var disruptive = map[v1alpha1.StepName]string{
	v1alpha1.StepEncapsulation:    "pod traffic between nodes moves to VXLAN everywhere",
	v1alpha1.StepBGP:              "calico-node restarts on every node and BGP sessions end",
	v1alpha1.StepServicesEndpoint: "calico-node restarts on every node",
}
