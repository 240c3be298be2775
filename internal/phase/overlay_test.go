package phase

import (
	"strings"
	"testing"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/record"
)

// migrated is installation() after every step of the migration.
func migrated() *operatorv1.Installation {
	return installation(func(i *operatorv1.Installation) {
		cn := i.Spec.CalicoNetwork
		cn.BGP = ptr.To(operatorv1.BGPDisabled)
		cn.WindowsDataplane = ptr.To(operatorv1.WindowsDataplaneHNS)
		cn.IPPools[0].Encapsulation, cn.IPPools[2].Encapsulation = operatorv1.EncapsulationVXLAN, operatorv1.EncapsulationVXLAN
		i.Spec.ServiceCIDRs = []string{"10.96.0.0/12"}
		i.Spec.WindowsNodes = &operatorv1.WindowsNodeSpec{CNIBinDir: "/opt/cni/bin"}
	})
}

// beforeMigration are the originals of installation(), with the overlay as
// recorded then.
func beforeMigration(overlay *operatorv1.Installation) *v1alpha1.Originals {
	o := recorded(&calico.Cluster{Installation: installation(func(i *operatorv1.Installation) {
		i.Spec.CalicoNetwork.WindowsDataplane = ptr.To(operatorv1.WindowsDataplaneDisabled)
	})})
	o.Overlay = record.Overlay(overlay)
	return o
}

func overlayOf(mutate func(*operatorv1.InstallationSpec)) *operatorv1.Installation {
	o := &operatorv1.Installation{}
	o.Name = calico.OverlayName
	mutate(&o.Spec)
	return o
}

func calicoNetwork(cn operatorv1.CalicoNetworkSpec) func(*operatorv1.InstallationSpec) {
	return func(s *operatorv1.InstallationSpec) { s.CalicoNetwork = &cn }
}

// overridden lists, step by step, the effective Installation's fields that
// the overlay keeps from each step's target.
func overridden(in Input) []string {
	var out []string
	for _, s := range Steps() {
		for _, c := range Overridden(s, in) {
			out = append(out, string(s.Name())+" "+c.Field()+": "+c.Before()+" -> "+c.After())
		}
	}
	return out
}

func TestOverridden(t *testing.T) {
	mtu := func(s *operatorv1.InstallationSpec) {
		s.CalicoNetwork = &operatorv1.CalicoNetworkSpec{MTU: ptr.To[int32](1400)}
	}
	crossSubnet := []operatorv1.IPPool{{Name: "v4-a", CIDR: "192.168.0.0/16", Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet}}
	restored := installation(func(i *operatorv1.Installation) {
		i.Spec.CalicoNetwork.WindowsDataplane = ptr.To(operatorv1.WindowsDataplaneDisabled)
	})
	for _, tc := range []struct {
		name    string
		in      Input
		overlay *operatorv1.Installation
		want    []string
	}{
		{"no overlay: nothing", migrate(&calico.Cluster{Installation: migrated()}), nil, nil},
		{"an overlay of other fields: nothing", migrate(&calico.Cluster{Installation: migrated()}), overlayOf(mtu), nil},
		{"an overlay with bgp Enabled after BGP was turned off",
			migrate(&calico.Cluster{Installation: migrated()}), overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)})),
			[]string{"BGP spec.calicoNetwork.bgp: Enabled -> Disabled"}},
		{"an overlay with the migration's own value: nothing",
			migrate(&calico.Cluster{Installation: migrated()}), overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPDisabled)})), nil},
		{"an overlay whose pools are CrossSubnet: their whole list wins",
			migrate(&calico.Cluster{Installation: migrated()}), overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{IPPools: crossSubnet})),
			[]string{"Encapsulation spec.calicoNetwork.ipPools[name=v4-a].encapsulation: VXLANCrossSubnet -> VXLAN"}},
		{"an overlay with other serviceCIDRs and Windows off",
			migrate(&calico.Cluster{Installation: migrated()}), overlayOf(func(s *operatorv1.InstallationSpec) {
				s.ServiceCIDRs = []string{"10.0.0.0/24"}
				s.CalicoNetwork = &operatorv1.CalicoNetworkSpec{WindowsDataplane: ptr.To(operatorv1.WindowsDataplaneDisabled)}
			}),
			[]string{"ServiceCIDRs spec.serviceCIDRs: [10.0.0.0/24] -> [10.96.0.0/12]",
				"WindowsDataplane spec.calicoNetwork.windowsDataplane: Disabled -> HNS"}},
		{"default not changed yet: the step's own change comes first",
			migrate(&calico.Cluster{Installation: installation(nil)}), overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)})), nil},
		{"a rollback: an overlay recorded without bgp now sets Disabled",
			rollback(&calico.Cluster{Installation: restored}, beforeMigration(overlayOf(mtu))),
			overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPDisabled)})),
			[]string{"BGP spec.calicoNetwork.bgp: Disabled -> Enabled"}},
		{"a rollback: an overlay that appeared with serviceCIDRs, no overlay recorded",
			rollback(&calico.Cluster{Installation: restored}, beforeMigration(nil)),
			overlayOf(func(s *operatorv1.InstallationSpec) { s.ServiceCIDRs = []string{"10.96.0.0/12"} }),
			[]string{"ServiceCIDRs spec.serviceCIDRs: [10.96.0.0/12] -> <absent>"}},
		{"a rollback: the overlay still holds what it held, the original effective value",
			rollback(&calico.Cluster{Installation: restored}, beforeMigration(overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPDisabled)})))),
			overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPDisabled)})), nil},
		{"a rollback: the overlay lost what it held",
			rollback(&calico.Cluster{Installation: restored}, beforeMigration(overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPDisabled)})))),
			nil, []string{"BGP spec.calicoNetwork.bgp: Enabled -> Disabled"}},
		{"a rollback: windowsNodes the overlay added would stay with Windows off",
			rollback(&calico.Cluster{Installation: restored}, beforeMigration(overlayOf(mtu))),
			overlayOf(func(s *operatorv1.InstallationSpec) { s.WindowsNodes = &operatorv1.WindowsNodeSpec{CNIBinDir: "/x"} }),
			[]string{"WindowsDataplane spec.windowsNodes: <set by the Tigera operator> -> <absent>"}},
		{"a rollback: windowsNodes the overlay held before",
			rollback(&calico.Cluster{Installation: restored}, beforeMigration(overlayOf(func(s *operatorv1.InstallationSpec) {
				s.WindowsNodes = &operatorv1.WindowsNodeSpec{CNIBinDir: "/x"}
			}))),
			overlayOf(func(s *operatorv1.InstallationSpec) { s.WindowsNodes = &operatorv1.WindowsNodeSpec{CNIBinDir: "/x"} }), nil},
		{"a rollback of a record without the overlay, and none now: nothing",
			rollback(&calico.Cluster{Installation: restored}, beforeMigration(nil)), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Cluster.Overlay = tc.overlay
			got := overridden(tc.in)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestOverlayConflictNamesTheOverlayFieldAndTheFix(t *testing.T) {
	in := migrate(&calico.Cluster{Installation: migrated(),
		Overlay: overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)}))})
	got := OverlayConflict(v1alpha1.StepBGP, in, Overridden(BGP{}, in), "argocd-controller")
	want := `Installation overlay (field manager "argocd-controller") sets spec.calicoNetwork.bgp: Enabled; the Tigera ` +
		`operator merges the overlay over Installation default, so the cluster runs spec.calicoNetwork.bgp Enabled, not ` +
		`Disabled as step BGP set it in Installation default. winready never changes the overlay: remove what it sets ` +
		`from the overlay where it is managed, e.g. kubectl patch installation overlay --type merge -p ` +
		`'{"spec":{"calicoNetwork":{"bgp":null}}}'; winready goes on by itself once the overlay no longer overrides it`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}

	t.Run("a rollback whose overlay lost a value it held", func(t *testing.T) {
		in := rollback(&calico.Cluster{Installation: installation(nil)},
			beforeMigration(overlayOf(calicoNetwork(operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPDisabled)}))))
		got := OverlayConflict(v1alpha1.StepBGP, in, Overridden(BGP{}, in), "")
		for _, part := range []string{"Installation overlay no longer sets spec.calicoNetwork.bgp (it held Disabled before the migration)",
			"the cluster runs spec.calicoNetwork.bgp Enabled, not Disabled as before the migration",
			"put back in the overlay what it held before the migration (status.originals.overlay)"} {
			if !strings.Contains(got, part) {
				t.Errorf("%q lacks %q", got, part)
			}
		}
		if strings.Contains(got, "kubectl patch") {
			t.Errorf("nothing to remove, yet: %q", got)
		}
	})
	t.Run("a rollback from a record without the overlay says so", func(t *testing.T) {
		in := rollback(&calico.Cluster{Installation: installation(nil),
			Overlay: overlayOf(func(s *operatorv1.InstallationSpec) { s.ServiceCIDRs = []string{"10.0.0.0/24"} })}, beforeMigration(nil))
		in.Originals.Overlay = nil
		got := OverlayConflict(v1alpha1.StepServiceCIDRs, in, Overridden(ServiceCIDRs{}, in), "")
		for _, part := range []string{`sets spec.serviceCIDRs: [10.0.0.0/24]`, `-p '{"spec":{"serviceCIDRs":null}}'`,
			"recorded by an earlier winready, which did not record the overlay"} {
			if !strings.Contains(got, part) {
				t.Errorf("%q lacks %q", got, part)
			}
		}
	})
}

func TestOverlayPace(t *testing.T) {
	strategy := appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	withMax := func(v int32) *operatorv1.Installation {
		return installation(func(i *operatorv1.Installation) {
			i.Spec.NodeUpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(v))}
		})
	}
	two := RolloutSpeed{Want: ptr.To(intstr.FromInt32(2))}
	for _, tc := range []struct {
		name    string
		speed   RolloutSpeed
		inst    *operatorv1.Installation
		overlay *operatorv1.Installation
		want    string
	}{
		{"the overlay's strategy replaces the faster one winready set",
			two, withMax(2), overlayOf(func(s *operatorv1.InstallationSpec) { s.NodeUpdateStrategy = strategy }),
			`Installation overlay sets spec.nodeUpdateStrategy: {"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}}, ` +
				`which replaces Installation default's: calico-node rolls out with maxUnavailable 1, not 2 from ` +
				`spec.rollout.maxUnavailable; remove it from the overlay for the faster rollout`},
		{"no speed asked for", RolloutSpeed{}, withMax(2), overlayOf(func(s *operatorv1.InstallationSpec) { s.NodeUpdateStrategy = strategy }), ""},
		{"the faster value is not in default (not yet, or put back)", two, withMax(1),
			overlayOf(func(s *operatorv1.InstallationSpec) { s.NodeUpdateStrategy = strategy }), ""},
		{"an overlay without a strategy", two, withMax(2), overlayOf(func(*operatorv1.InstallationSpec) {}), ""},
		{"no overlay", two, withMax(2), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.speed.OverlayPace(Input{Cluster: &calico.Cluster{Installation: tc.inst, Overlay: tc.overlay}})
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
