// Package ciexample is a platform team's CI suite for its WindowsReadiness:
// it starts winready with the simulated Tigera operator on a local control
// plane, seeded from the cluster's own YAML, and checks what winready would do
// and does. Run it with KUBEBUILDER_ASSETS (kube-apiserver and etcd) and
// WINREADY_CALICO_CRDS (Calico's CRDs) set: `make kit-example` in winready's
// checkout does.
package ciexample

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/test/kit"
)

func TestMain(m *testing.M) {
	// winready, the simulator and envtest log through controller-runtime's
	// logger: zap.New(zap.UseDevMode(true)) instead shows what they do.
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	os.Exit(m.Run())
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestWindowsReadiness(t *testing.T) {
	c := kit.Start(t, kit.Options{Seed: read(t, "testdata/cluster.yaml")})
	ctx := t.Context()
	wr := read(t, "testdata/windowsreadiness.yaml")

	t.Run("the manifests in Git are valid, and a bad change is rejected with the CRD's message", func(t *testing.T) {
		if err := c.Validate(ctx, wr); err != nil {
			t.Fatalf("testdata/windowsreadiness.yaml: %v", err)
		}
		err := c.Validate(ctx, read(t, "testdata/bad-windowsreadiness.yaml"))
		const cel = "must be an IPv4 CIDR such as 10.96.0.0/12: Windows nodes support IPv4 only"
		if err == nil || !strings.Contains(err.Error(), cel) {
			t.Fatalf("testdata/bad-windowsreadiness.yaml: %v, want the CEL rule's message %q", err, cel)
		}
	})

	t.Run("the preflight passes and the dry run plans every change", func(t *testing.T) {
		plan, err := c.Plan(ctx, wr)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Preflight.Passed || len(plan.Preflight.Failed()) > 0 {
			t.Fatalf("preflight: %s: %s", plan.Preflight.Reason, plan.Preflight.Message)
		}
		want := []string{
			"StrictAffinity IPAMConfiguration default spec.strictAffinity: false -> true",
			"Encapsulation Installation default spec.calicoNetwork.ipPools[name=default-ipv4-ippool].encapsulation: VXLANCrossSubnet -> VXLAN",
			"BGP Installation default spec.calicoNetwork.bgp: Enabled -> Disabled",
			"ServicesEndpoint ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_HOST: <absent> -> 192.168.10.5",
			"ServicesEndpoint ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_PORT: <absent> -> 6443",
			"ServiceCIDRs Installation default spec.serviceCIDRs: <absent> -> [10.96.0.0/12]",
			"WindowsDataplane Installation default spec.calicoNetwork.windowsDataplane: Disabled -> HNS",
		}
		var got []string
		for _, ch := range plan.Changes {
			got = append(got, fmt.Sprintf("%s %s %s: %s -> %s", ch.Step, ch.Object, ch.Field, ch.Before, ch.After))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("applied as it is in Git, it makes the cluster ready for Windows nodes", func(t *testing.T) {
		if _, err := c.Apply(ctx, wr); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitPhase(ctx, v1alpha1.PhaseReady); err != nil {
			t.Fatal(err)
		}
		checkMigrated(ctx, t, c.Client())
	})
}

// checkMigrated checks the Calico objects a migrated cluster holds.
func checkMigrated(ctx context.Context, t *testing.T, k client.Client) {
	t.Helper()
	inst := &operatorv1.Installation{}
	ipam := &calicov3.IPAMConfiguration{}
	pool := &calicov3.IPPool{}
	cm := &corev1.ConfigMap{}
	for _, get := range []struct {
		key client.ObjectKey
		obj client.Object
	}{
		{client.ObjectKey{Name: "default"}, inst},
		{client.ObjectKey{Name: "default"}, ipam},
		{client.ObjectKey{Name: "default-ipv4-ippool"}, pool},
		{client.ObjectKey{Namespace: "tigera-operator", Name: "kubernetes-services-endpoint"}, cm},
	} {
		if err := k.Get(ctx, get.key, get.obj); err != nil {
			t.Fatal(err)
		}
	}
	cn := inst.Spec.CalicoNetwork
	if *cn.BGP != operatorv1.BGPDisabled || *cn.WindowsDataplane != operatorv1.WindowsDataplaneHNS ||
		cn.IPPools[0].Encapsulation != operatorv1.EncapsulationVXLAN || !slices.Equal(inst.Spec.ServiceCIDRs, []string{"10.96.0.0/12"}) {
		t.Errorf("Installation: bgp %s, windowsDataplane %s, encapsulation %s, serviceCIDRs %v",
			*cn.BGP, *cn.WindowsDataplane, cn.IPPools[0].Encapsulation, inst.Spec.ServiceCIDRs)
	}
	if !ipam.Spec.StrictAffinity || pool.Spec.VXLANMode != calicov3.VXLANModeAlways {
		t.Errorf("strictAffinity %t, IPPool vxlanMode %s", ipam.Spec.StrictAffinity, pool.Spec.VXLANMode)
	}
	if cm.Data["KUBERNETES_SERVICE_HOST"] != "192.168.10.5" || cm.Data["KUBERNETES_SERVICE_PORT"] != "6443" {
		t.Errorf("services endpoint: %v", cm.Data)
	}
}
