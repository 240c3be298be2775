package v1alpha1_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
)

var _ = Describe("The WindowsReadiness API", func() {
	AfterEach(func() { on.DeleteWR() })

	create := func(name string, mutate func(*v1alpha1.WindowsReadiness)) error {
		wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: name}}
		mutate(wr)
		return k8s.Create(ctx, wr)
	}
	none := func(*v1alpha1.WindowsReadiness) {}
	dur := func(s string) *metav1.Duration {
		return &metav1.Duration{Duration: mustParse(s)}
	}

	It("accepts the default object and fills in the defaults", func() {
		Expect(create(v1alpha1.Name, none)).To(Succeed())
		wr := on.WR()
		Expect(wr.Spec.Direction).To(Equal(v1alpha1.DirectionMigrate))
		Expect(wr.Spec.WindowsNodeGate).To(Equal(v1alpha1.GateEnabled))
		Expect(wr.Spec.PhaseTimeout).To(BeNil(), "phaseTimeout is a deprecated name with no default")
		Expect(wr.Spec.ProgressDeadline).To(BeNil())
		Expect(wr.Spec.EffectiveProgressDeadline().String()).To(Equal("30m0s"))
		Expect(wr.Spec.Preflight.ProbeTimeout.Duration.String()).To(Equal("30s"))
	})

	It("shows direction, phase, the step, the rollout's progress and ETA, ready and age in kubectl get, and the message in -o wide", func() {
		Expect(create(v1alpha1.Name, none)).To(Succeed())
		disco, err := discovery.NewDiscoveryClientForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		// What kubectl get asks for: the server renders the printer columns.
		body, err := disco.RESTClient().Get().AbsPath("/apis/winready.io/v1alpha1/windowsreadinesses").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		table := &metav1.Table{}
		Expect(json.Unmarshal(body, table)).To(Succeed())
		var names, wide []string
		for _, c := range table.ColumnDefinitions {
			if c.Priority == 0 {
				names = append(names, c.Name)
			} else {
				wide = append(wide, c.Name)
			}
		}
		Expect(names).To(Equal([]string{"Name", "Direction", "Phase", "Step", "Progress", "ETA", "Ready", "Age"}))
		Expect(wide).To(Equal([]string{"Message"}))
		Expect(table.Rows).To(HaveLen(1))
		Expect(table.Rows[0].Cells[0:2]).To(Equal([]any{"default", "Migrate"}))
	})

	It("keeps phaseTimeout as the name of the progress deadline and takes both when they agree", func() {
		Expect(create(v1alpha1.Name, func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.PhaseTimeout, wr.Spec.ProgressDeadline = dur("45m"), dur("45m")
			wr.Spec.Rollout.Conservative = true
		})).To(Succeed())
		Expect(on.WR().Spec.EffectiveProgressDeadline().String()).To(Equal("45m0s"))
	})

	It("takes a rollout maxUnavailable as a count or a percentage up to 25%", func() {
		for _, v := range []intstr.IntOrString{intstr.FromInt32(40), intstr.FromString("25%"), intstr.FromString("1%")} {
			Expect(create(v1alpha1.Name, func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.MaxUnavailable = &v })).To(Succeed(), v.String())
			Expect(on.WR().Spec.Rollout.MaxUnavailable).To(HaveValue(Equal(v)))
			on.DeleteWR()
		}
	})

	It("rejects any name but default", func() {
		err := create("other", none)
		Expect(err).To(MatchError(ContainSubstring("metadata.name must be 'default'")))
	})

	DescribeTable("rejects invalid input with a message naming the field",
		func(mutate func(*v1alpha1.WindowsReadiness), field, message string) {
			err := create(v1alpha1.Name, mutate)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(field))
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a malformed service CIDR", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{"10.96.0.0/33"}
		}, "spec.serviceCIDRs[0]", "must be an IPv4 CIDR"),
		Entry("an IPv6 service CIDR", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{"fd00::/108"}
		}, "spec.serviceCIDRs[0]", "Windows nodes support IPv4 only"),
		Entry("a service CIDR with host bits", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{"10.96.0.1/12"}
		}, "spec.serviceCIDRs[0]", "host bits zero"),
		Entry("overlapping service CIDRs", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{"10.96.0.0/12", "10.100.0.0/16"}
		}, "spec.serviceCIDRs", "must not overlap"),
		Entry("a rollout maxUnavailable above 25%", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromString("30%"))
		}, "spec.rollout.maxUnavailable", "a percentage from 1% to 25%"),
		Entry("a rollout maxUnavailable of no node", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		}, "spec.rollout.maxUnavailable", "a node count of at least 1"),
		Entry("a rollout maxUnavailable that is neither a count nor a percentage", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromString("five"))
		}, "spec.rollout.maxUnavailable", "a percentage from 1% to 25%"),
		Entry("an empty API server host", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "", Port: 6443}
		}, "spec.apiServer.host", "at least 1 chars long"),
		Entry("an invalid API server host", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "api_server!", Port: 6443}
		}, "spec.apiServer.host", "must be an IPv4 address or a lower-case DNS name"),
		Entry("a dotted number that is no address", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.256", Port: 6443}
		}, "spec.apiServer.host", "must be an IPv4 address or a lower-case DNS name"),
		Entry("an IPv6 API server host", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "fd00::1", Port: 6443}
		}, "spec.apiServer.host", "does not support IPv6"),
		Entry("port 0", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.10", Port: 0}
		}, "spec.apiServer.port", "should be greater than or equal to 1"),
		Entry("port 65536", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.10", Port: 65536}
		}, "spec.apiServer.port", "should be less than or equal to 65535"),
		Entry("a step approved that waits for no approval", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepStrictAffinity}
		}, "spec.approvedSteps", "only the disruptive steps Encapsulation, BGP and ServicesEndpoint"),
		Entry("an unknown direction", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Direction = "Sideways"
		}, "spec.direction", `supported values: "Migrate", "Rollback"`),
		Entry("a phase timeout below a minute", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.PhaseTimeout = dur("30s")
		}, "spec.phaseTimeout", "must be between 1m and 24h"),
		Entry("a phase timeout above a day", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.PhaseTimeout = dur("25h")
		}, "spec.phaseTimeout", "must be between 1m and 24h"),
		Entry("a progress deadline above a day", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ProgressDeadline = dur("25h")
		}, "spec.progressDeadline", "must be between 1m and 24h"),
		Entry("a progress deadline and a different phase timeout", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ProgressDeadline, wr.Spec.PhaseTimeout = dur("1h"), dur("30m")
		}, "spec", "phaseTimeout is the deprecated name of progressDeadline"),
		Entry("a probe timeout above ten minutes", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.ProbeTimeout = dur("11m")
		}, "spec.preflight.probeTimeout", "must be between 1s and 10m"),
		Entry("an extra target that is no IPv4 address", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.ExtraTargets = []v1alpha1.IPv4Address{"win-1.example.com"}
		}, "spec.preflight.extraTargets[0]", "must be an IPv4 address"),
		Entry("an unknown acknowledgement", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.Acknowledge = []v1alpha1.Acknowledgement{"Everything"}
		}, "spec.preflight.acknowledge[0]", `supported values: "BGPPeers", "ServiceAdvertisement", "HelmManagedInstallation"`),
		Entry("an unknown gate mode", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.WindowsNodeGate = "Maybe"
		}, "spec.windowsNodeGate", `supported values: "Enabled", "Disabled"`),
	)
})
