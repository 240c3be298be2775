// Package kit runs winready in a platform team's own test suite: a local
// control plane (envtest: kube-apiserver and etcd), a Calico cluster seeded
// from the team's own YAML, the simulated Tigera operator of
// github.com/winready/winready/test/calicosim, and winready's reconciler wired
// as the production binary wires it. A test applies its WindowsReadiness and
// asserts, in a few lines, the preflight verdict, the dry run's plan or the end
// state; Validate checks a manifest against the CRD's schema and CEL rules
// with the API server's own validation.
//
//	c := kit.Start(t, kit.Options{Seed: installationYAML})
//	plan, err := c.Plan(ctx, wrYAML)           // spec.dryRun: true, nothing changes
//	_, err = c.Apply(ctx, wrYAML)              // as a GitOps tool would apply it
//	_, err = c.WaitPhase(ctx, v1alpha1.PhaseReady)
//	err = c.Validate(ctx, badYAML)             // the API server's message, CEL included
//
// Start takes a *testing.T, a *testing.B or Ginkgo's GinkgoT(); New and Stop
// do the same without one.
//
// # What it needs
//
// The control plane binaries: Options.ControlPlane, else the environment
// variable KUBEBUILDER_ASSETS, as envtest reads it (a directory with
// kube-apiserver and etcd; `setup-envtest use -p path` prints one, and
// `make envtest-assets` in a winready checkout builds them into
// bin/k8s/<version>). Each is given two minutes to start, for busy CI
// runners, unless KUBEBUILDER_CONTROLPLANE_START_TIMEOUT says otherwise.
//
// Optionally, a directory for snapshots: Options.Snapshots, else the
// environment variable WINREADY_ENVTEST_SNAPSHOTS. The first control plane of
// each set of CRDs (on the same kube-apiserver and etcd binaries) installs
// them into a snapshot of etcd's data there; every later one, in any process,
// starts from a copy of it and only waits for its CRDs to be served: about
// half the CPU of a start with Calico's CRDs. Processes that start at once
// wait for the one that makes the snapshot (a file lock; without file locks
// each control plane installs its CRDs), and a snapshot unused for a week is
// removed when another is made.
//
// Calico's CRDs: Options.CalicoCRDs, else the environment variable
// WINREADY_CALICO_CRDS, a directory with the subdirectories operator/ (the
// operator.tigera.io CRDs) and calico/ (the projectcalico.org/v3 CRDs), as
// hack/calico-crds.sh lays them out in bin/crds of a winready checkout from the
// Tigera operator module v1.43.0 (pkg/imports/crds). winready's own CRD is
// built in (package github.com/winready/winready/config/crd).
//
// # The seeded cluster
//
// Options.Seed is YAML, one or more documents (a `kind: List` too), as kept in
// Git or exported with `kubectl get -o yaml`. It must hold the Installation
// "default"; the cluster then holds what the Tigera operator would have made of
// it on an earlier run (the Installation with the operator's defaults and its
// status, the IP pools it describes, calico-node rolled out on every node,
// FelixConfiguration default, TigeraStatus calico and ippools Available),
// Options.Nodes, and every other object of the seed: IPPools outside the
// Installation, the IPAMConfiguration, kube-system/kubeadm-config, the
// tigera-operator/kubernetes-services-endpoint ConfigMap, BGPPeers, policies.
// An object of a kind the control plane does not serve (no CRD) is an error.
// Nothing else: without an IPAMConfiguration in the seed there is none, as in a
// cluster where strictAffinity was never set. The seed is applied as a GitOps
// tool would (server-side apply; server-set metadata and status are dropped),
// except that an IPPool the Installation describes comes from the Installation,
// as the operator makes it, and a FelixConfiguration "default" in the seed
// is applied over the operator's.
//
// # Logs
//
// The kit never sets controller-runtime's global logger, which the managers
// and envtest write to: set it in the suite (ctrl.SetLogger) to see their logs
// or to silence controller-runtime's notice that it was never set.
package kit
