package admission_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/phase"
)

// The policies must admit every write winready itself makes: each change
// the steps produce, migrating and rolling back, with the rollout speed that
// rides along, is sent as the manager in a dry run before an admin makes it
// for real, so that the next step reads the cluster it would find.
var _ = Describe("winready's own writes", func() {
	It("are admitted for the manager, every change of every step in both directions", func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, servicesEndpoint(nil)))).To(Succeed())
		ipam := &calicov3.IPAMConfiguration{}
		ipam.Name = calico.IPAMConfigName
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, ipam))).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, servicesEndpoint(nil)))).To(Succeed())
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, ipam))).To(Succeed())
		})
		setInstallation()
		// A pace of its own, narrower than the spec's 10%: the canary slows
		// it to one node, the spec's follows, and the original is put back.
		inst := &operatorv1.Installation{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: calico.InstallationName}, inst)).To(Succeed())
		inst.Spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("5%"))
		Expect(k8s.Update(ctx, inst)).To(Succeed())
		inState(then2(named, migratingAt10))

		readers := phase.Readers{Cache: k8s, API: k8s}
		read := func() *calico.Cluster {
			// The reconciler reads the Installation for every step.
			inst, err := calico.GetInstallation(ctx, k8s)
			Expect(err).NotTo(HaveOccurred())
			cl := &calico.Cluster{Installation: inst}
			for _, st := range phase.Steps() {
				Expect(st.Read(ctx, readers, cl)).To(Succeed(), string(st.Name()))
			}
			return cl
		}
		originals := &v1alpha1.Originals{}
		first := read()
		for _, st := range phase.Steps() {
			st.Record(first, originals)
		}
		phase.RecordMaxUnavailable(first, originals)
		targets := phase.Targets{ServiceCIDRs: []string{"10.96.0.0/12"}, Host: "10.0.0.10", Port: "6443"}
		speed := phase.RolloutSpeed{Want: on10()}
		dryManager := client.NewDryRunClient(manager)

		sent := map[v1alpha1.Direction]int{}
		write := func(what string, dir v1alpha1.Direction, changes func(phase.Input) []calico.Change) {
			in := phase.Input{Cluster: read(), Originals: originals, Targets: targets, Direction: dir}
			due := calico.Due(changes(in))
			if len(due) == 0 {
				return
			}
			Eventually(func() error { return calico.Apply(ctx, dryManager, read(), due) }).Should(Succeed(), "%s %s", dir, what)
			Expect(calico.Apply(ctx, k8s, read(), due)).To(Succeed(), "%s %s, as an admin", dir, what)
			sent[dir] += len(due)
		}
		// canary says whether the first change that re-renders calico-node
		// goes out at the canary's pace (spec.rollout.canary), raised to the
		// spec's once the canary passes, or at the spec's at once.
		walk := func(dir v1alpha1.Direction, steps []phase.Step, canary bool) {
			for _, st := range steps {
				write(string(st.Name()), dir, func(in phase.Input) []calico.Change {
					changes := st.Diff(in)
					if st.Name() == v1alpha1.StepBGP {
						// The speed rides along with the first change
						// that re-renders calico-node.
						if canary {
							slower, ok := speed.Canary(in)
							Expect(ok).To(BeTrue(), "a canary for this rollout")
							changes = append(changes, slower...)
						} else {
							changes = append(changes, speed.Faster(in)...)
						}
					}
					return changes
				})
				if st.Name() == v1alpha1.StepBGP && canary {
					write("the pace after the canary", dir, speed.AfterCanary)
				}
			}
		}

		walk(v1alpha1.DirectionMigrate, phase.Steps(), true)
		write("the speed put back", v1alpha1.DirectionMigrate, func(in phase.Input) []calico.Change { return speed.Restore(in, true) })
		Expect(sent[v1alpha1.DirectionMigrate]).To(BeNumerically(">=", 10), "strictAffinity, encapsulation, BGP, host, port, "+
			"serviceCIDRs, the Windows dataplane, the canary's pace, the spec's pace, the original pace")

		By("the Tigera operator writes windowsNodes once the Windows dataplane is on")
		Expect(k8s.Get(ctx, client.ObjectKey{Name: calico.InstallationName}, inst)).To(Succeed())
		inst.Spec.WindowsNodes = &operatorv1.WindowsNodeSpec{CNIBinDir: "/opt/cni/bin"}
		Expect(k8s.Update(ctx, inst)).To(Succeed())

		inState(then2(named, migratingAt10, rollingBack))
		reversed := slices.Clone(phase.Steps())
		slices.Reverse(reversed)
		walk(v1alpha1.DirectionRollback, reversed, false)
		write("the speed put back", v1alpha1.DirectionRollback, func(in phase.Input) []calico.Change { return speed.Restore(in, true) })
		Expect(sent[v1alpha1.DirectionRollback]).To(BeNumerically(">=", 7))

		By("the rollback left the Installation as it found it")
		Expect(k8s.Get(ctx, client.ObjectKey{Name: calico.InstallationName}, inst)).To(Succeed())
		want := &operatorv1.Installation{}
		baseInstallation(want)
		Expect(inst.Spec.CalicoNetwork.IPPools[0].Encapsulation).To(Equal(want.Spec.CalicoNetwork.IPPools[0].Encapsulation))
		Expect(inst.Spec.CalicoNetwork.BGP).To(Equal(want.Spec.CalicoNetwork.BGP))
		Expect(inst.Spec.WindowsNodes).To(BeNil())
	})
})

func then2(states ...wrState) wrState {
	return func(wr *v1alpha1.WindowsReadiness) {
		for _, s := range states {
			s(wr)
		}
	}
}

func on10() *intstr.IntOrString {
	wr := &v1alpha1.WindowsReadiness{}
	migratingAt10(wr)
	return wr.Spec.Rollout.MaxUnavailable
}
