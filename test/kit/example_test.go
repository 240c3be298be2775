package kit_test

import (
	"context"
	"fmt"
	"path/filepath"

	operatorv1 "github.com/tigera/operator/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/test/kit"
)

// The Installation and kubeadm-config of a cluster, as kept in Git.
const clusterYAML = `
apiVersion: operator.tigera.io/v1
kind: Installation
metadata:
  name: default
spec:
  calicoNetwork:
    bgp: Enabled
    ipPools:
    - name: default-ipv4-ippool
      cidr: 172.20.0.0/16
      encapsulation: VXLANCrossSubnet
      blockSize: 26
      natOutgoing: Enabled
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kubeadm-config
  namespace: kube-system
data:
  ClusterConfiguration: |
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: ClusterConfiguration
    controlPlaneEndpoint: 10.0.0.10:6443
    networking:
      podSubnet: 172.20.0.0/16
      serviceSubnet: 10.96.0.0/12
`

// The cluster's WindowsReadiness, as kept in Git.
const wrYAML = `
apiVersion: winready.io/v1alpha1
kind: WindowsReadiness
metadata:
  name: default
spec:
  serviceCIDRs: ["10.96.0.0/12"]
`

// A change to it that the CRD's CEL rules reject: host bits set.
const badYAML = `
apiVersion: winready.io/v1alpha1
kind: WindowsReadiness
metadata:
  name: default
spec:
  serviceCIDRs: ["10.96.0.1/12"]
`

// Start a cluster from a platform team's YAML, look at the dry run's plan,
// migrate, and validate a manifest that winready's CRD rejects.
func Example() {
	ctx := context.Background()
	c, err := kit.New(ctx, kit.Options{
		Seed: []byte(clusterYAML),
		// bin/crds of a winready checkout (hack/calico-crds.sh); elsewhere set
		// WINREADY_CALICO_CRDS and leave this out.
		CalicoCRDs: filepath.Join("..", "..", "bin", "crds"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Stop() }()

	plan, err := c.Plan(ctx, []byte(wrYAML))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("preflight passed:", plan.Preflight.Passed)
	for _, ch := range plan.Changes {
		fmt.Printf("%s: %s %s: %s -> %s\n", ch.Step, ch.Object, ch.Field, ch.Before, ch.After)
	}

	if _, err := c.Apply(ctx, []byte(wrYAML)); err != nil {
		fmt.Println(err)
		return
	}
	wr, err := c.WaitPhase(ctx, v1alpha1.PhaseReady)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(wr.Status.Phase+":", wr.Status.Message)
	inst := &operatorv1.Installation{}
	if err := c.Client().Get(ctx, client.ObjectKey{Name: "default"}, inst); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("Installation bgp:", *inst.Spec.CalicoNetwork.BGP)

	fmt.Println(c.Validate(ctx, []byte(badYAML)))
	// Output:
	// preflight passed: true
	// StrictAffinity: IPAMConfiguration default spec.strictAffinity: <absent> -> true
	// Encapsulation: Installation default spec.calicoNetwork.ipPools[name=default-ipv4-ippool].encapsulation: VXLANCrossSubnet -> VXLAN
	// BGP: Installation default spec.calicoNetwork.bgp: Enabled -> Disabled
	// ServicesEndpoint: ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_HOST: <absent> -> 10.0.0.10
	// ServicesEndpoint: ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_PORT: <absent> -> 6443
	// ServiceCIDRs: Installation default spec.serviceCIDRs: <absent> -> [10.96.0.0/12]
	// WindowsDataplane: Installation default spec.calicoNetwork.windowsDataplane: Disabled -> HNS
	// Ready: the cluster is ready for Windows nodes
	// Installation bgp: Disabled
	// WindowsReadiness.winready.io "default" is invalid: spec.serviceCIDRs[0]: Invalid value: "10.96.0.1/12": must be a network address in canonical form (host bits zero), such as 10.96.0.0/12
}
