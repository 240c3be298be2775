package admission_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/probens"
)

// tokenClient is a client with the token of the agents' ServiceAccount that
// the request asks for.
func tokenClient(spec authenticationv1.TokenRequestSpec) client.WithWatch {
	c, err := probens.TokenClient(ctx, k8s, cfg, probeNS, probe.ServiceAccount, spec)
	Expect(err).NotTo(HaveOccurred())
	return c
}

// agentOn is a client holding a token bound to a probe pod on node, as the
// agent running there holds; the pod is removed after the spec.
func agentOn(node string) client.WithWatch { return agentOnAs(probe.ServiceAccount, node) }

// agentOnAs is agentOn for the agents running as account: the pod is the
// one the DaemonSet controller makes of the probe's or the pod network
// check's DaemonSet, which the probe namespace's Pod policy admits.
func agentOnAs(account, node string) client.WithWatch {
	ds := probeDaemonSet(managerImage)
	if account == podcheck.ServiceAccount {
		ds = podCheckDaemonSet()
	}
	Expect(ds.Spec.Template.Spec.ServiceAccountName).To(Equal(account))
	c, pod, err := probens.Agent(ctx, k8s, cfg, ds, node)
	if pod != nil {
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
		})
	}
	Expect(err).NotTo(HaveOccurred())
	return c
}

// report is node's probe report ConfigMap claiming to be from claimed.
func report(node, claimed string) *corev1.ConfigMap {
	cm, err := probens.Report(probeNS, node, claimed)
	Expect(err).NotTo(HaveOccurred())
	return cm
}

var _ = Describe("Probe reports", func() {
	It("accept from an agent only its own node's report, never the plan", func() {
		for _, n := range []string{"node-a", "node-b"} {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{calico.OSLabel: "linux"}}}
			Expect(k8s.Create(ctx, node)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, node))).To(Succeed()) })
		}
		a := agentOn("node-a")
		plan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: probe.RoundKind.PlanName("node-a"),
			Labels: map[string]string{round.PlanLabel: "r", round.ComponentLabel: probe.RoundKind.Component}},
			Data: map[string]string{round.NodeKey: "node-a", round.PlanKey: `{"addr":"10.0.0.1"}`}}
		Expect(a.Create(ctx, plan, client.DryRunAll)).To(MatchError(ContainSubstring("writes only ConfigMap winready-probe-report-node-a")))
		Expect(k8s.Create(ctx, plan)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, plan)).To(Succeed()) })
		mine, err := round.Agent[probe.Params, probe.Result]{Client: a, Kind: probe.RoundKind, Namespace: probeNS, Node: "node-a"}.Plan(ctx, "r")
		Expect(err).NotTo(HaveOccurred(), "an agent reads its own plan")
		Expect(mine.Addr.String()).To(Equal("10.0.0.1"))
		plan.Data[round.PlanKey] = `{"addr":"10.0.0.2"}`
		Expect(a.Update(ctx, plan)).To(MatchError(ContainSubstring("writes only ConfigMap winready-probe-report-node-a")))
		forgedPlan := report("node-a", "node-a")
		forgedPlan.Labels[round.PlanLabel] = "r"
		Expect(a.Create(ctx, forgedPlan, client.DryRunAll)).To(MatchError(ContainSubstring("an agent writes no plan")),
			"its own report, labelled as a plan the manager would read")

		Expect(a.Create(ctx, report("node-b", "node-b"), client.DryRunAll)).To(MatchError(ContainSubstring("writes only ConfigMap")))
		Expect(a.Create(ctx, report("node-a", "node-b"), client.DryRunAll)).To(MatchError(ContainSubstring("reports only for its own node")))
		own := report("node-a", "node-a")
		Expect(a.Create(ctx, own)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, own)).To(Succeed()) })
		Expect(a.Update(ctx, own)).To(Succeed(), "an agent restarted within the round replaces its report")

		By("refusing a token bound to no pod")
		unbound := tokenClient(authenticationv1.TokenRequestSpec{})
		Expect(unbound.Create(ctx, report("node-a", "node-a"), client.DryRunAll)).To(MatchError(ContainSubstring("the token of its pod")))

		By("refusing a token bound to the node rather than to a pod on it")
		node := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "node-a"}, node)).To(Succeed())
		nodeBound := tokenClient(authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID},
		})
		Expect(nodeBound.Create(ctx, report("node-a", "node-a"), client.DryRunAll)).To(MatchError(ContainSubstring("the token of its pod")))

		By("holding each agent to its own kind's report")
		unlabelled := report("node-a", "node-a")
		delete(unlabelled.Labels, round.ComponentLabel)
		Expect(a.Create(ctx, unlabelled, client.DryRunAll)).To(MatchError(ContainSubstring("its own kind's report")))
		check := agentOnAs(podcheck.ServiceAccount, "node-a")
		forged := report("node-a", "node-a")
		forged.Name = podcheck.RoundKind.ReportName("node-a")
		Expect(check.Create(ctx, forged, client.DryRunAll)).To(MatchError(ContainSubstring("its own kind's report")),
			"a pod network check token writes no report the probe round counts")
		ownReport, err := round.ReportObject(podcheck.RoundKind, probeNS, round.Report[podcheck.Result]{Round: "r", Node: "node-a", Stage: round.Serving})
		Expect(err).NotTo(HaveOccurred())
		Expect(check.Create(ctx, ownReport, client.DryRunAll)).To(Succeed(), "its own report")
		Expect(check.Get(ctx, client.ObjectKey{Namespace: probeNS, Name: probe.RoundKind.Name}, &corev1.Secret{})).
			To(MatchError(ContainSubstring("forbidden")), "the probe's key is not the pod network check's")
	})

})
