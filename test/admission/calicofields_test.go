package admission_test

import (
	"encoding/json"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
)

// managerPatch patches obj in a dry run as the manager's ServiceAccount
// does, under winready's field manager.
func managerPatch(obj client.Object, pt types.PatchType, data string) error {
	return manager.Patch(ctx, obj, client.RawPatch(pt, []byte(data)), client.DryRunAll)
}

var _ = Describe("The manager's writes to Calico's objects", func() {
	It("are held to the fields winready owns", func() {
		// The Installation with a pool that names natOutgoing, IPAMConfiguration
		// default, and no services endpoint yet.
		setInstallation(func(inst *operatorv1.Installation) {
			inst.Spec.CalicoNetwork.IPPools[0].NATOutgoing = operatorv1.NATOutgoingEnabled
		})
		ipam := &calicov3.IPAMConfiguration{ObjectMeta: metav1.ObjectMeta{Name: calico.IPAMConfigName},
			Spec: calicov3.IPAMConfigurationSpec{AutoAllocateBlocks: true}}
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, ipam.DeepCopy()))).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, ipam))).To(Succeed()) })
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, servicesEndpoint(nil)))).To(Succeed())
		// A migration under way, at 10%: with none, the manager writes
		// nothing here.
		inState(migratingAt10)
		inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName}}
		refusedInst := map[string]string{
			"registry":        `[{"op":"add","path":"/spec/registry","value":"attacker.example.com/"}]`,
			"imagePath":       `[{"op":"add","path":"/spec/imagePath","value":"attacker"}]`,
			"a component":     `[{"op":"add","path":"/spec/calicoNodeDaemonSet","value":{"spec":{"template":{"spec":{"containers":[{"name":"calico-node","resources":{}}]}}}}}]`,
			"calicoNetwork":   `[{"op":"add","path":"/spec/calicoNetwork/linuxDataplane","value":"BPF"}]`,
			"a pool's fields": `[{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/natOutgoing","value":"Disabled"}]`,
			"a new pool":      `[{"op":"add","path":"/spec/calicoNetwork/ipPools/-","value":{"cidr":"10.244.0.0/16","encapsulation":"VXLAN"}}]`,
			"labels":          `[{"op":"add","path":"/metadata/labels","value":{"example.com/x":"y"}}]`,
			"an annotation":   `[{"op":"add","path":"/metadata/annotations","value":{"example.com/x":"y"}}]`,
		}
		Eventually(func() error {
			return managerPatch(inst, types.JSONPatchType, refusedInst["registry"])
		}).Should(MatchError(ContainSubstring("winready changes only calicoNetwork")), "the policy is in force")
		for what, patch := range refusedInst {
			Expect(managerPatch(inst, types.JSONPatchType, patch)).To(MatchError(ContainSubstring("winready")), what)
			Expect(k8s.Patch(ctx, inst, client.RawPatch(types.JSONPatchType, []byte(patch)), client.DryRunAll)).
				To(Succeed(), "others are not held to it: %s", what)
		}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		claim := calico.ClaimOps(inst.Labels)
		claimJSON, err := json.Marshal(claim)
		Expect(err).NotTo(HaveOccurred())
		Expect(managerPatch(inst, types.JSONPatchType, `[
			{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)).
			To(MatchError(ContainSubstring("only with its claim")), "unclaimed")
		Expect(managerPatch(inst, types.JSONPatchType, `[`+strings.Trim(string(claimJSON), "[]")+`,
			{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLAN"},
			{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"},
			{"op":"add","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"},
			{"op":"add","path":"/spec/serviceCIDRs","value":["10.96.0.0/12"]},
			{"op":"add","path":"/spec/nodeUpdateStrategy","value":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"10%"}}}]`)).
			To(Succeed(), "the fields winready owns")
		Expect(managerPatch(inst, types.MergePatchType, `{"metadata":{"labels":{"`+calico.ClaimLabel+`":"true"},"annotations":{"`+
			calico.HoldAnnotation+`":"2026-12-03T12:00:00Z"}}}`)).
			To(Succeed(), "the mark of the calico-node hold")
		Expect(managerPatch(inst, types.MergePatchType, `{"metadata":{"annotations":{"`+calico.HoldAnnotation+`":null}}}`)).
			To(Succeed(), "the mark of the calico-node hold, removed")

		By("the services endpoint ConfigMap: its two keys only")
		endpoint := func(name string, data map[string]string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: calico.OperatorNamespace, Name: name,
				Labels: map[string]string{calico.ClaimLabel: "true"}}, Data: data}
		}
		Expect(createAsManager(endpoint(calico.ServicesEndpointConfigMap, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10",
			"KUBERNETES_SERVICE_PORT": "6443"}))).To(Succeed())
		Expect(createAsManager(endpoint(calico.ServicesEndpointConfigMap, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10",
			"OTHER": "x"}))).To(MatchError(ContainSubstring("writes only KUBERNETES_SERVICE_HOST")))
		Expect(createAsManager(endpoint("other", map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10"}))).
			To(MatchError(ContainSubstring("writes only the ConfigMap kubernetes-services-endpoint")))
		kept := endpoint(calico.ServicesEndpointConfigMap, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10", "OTHER": "people's"})
		Expect(k8s.Create(ctx, kept)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, kept))).To(Succeed()) })
		Expect(managerPatch(kept, types.MergePatchType, `{"data":{"KUBERNETES_SERVICE_PORT":"6443"}}`)).To(Succeed())
		Expect(managerPatch(kept, types.MergePatchType, `{"data":{"OTHER":"attacker's"}}`)).
			To(MatchError(ContainSubstring("writes only KUBERNETES_SERVICE_HOST")))
		Expect(manager.Delete(ctx, kept, client.DryRunAll)).To(MatchError(ContainSubstring("holds nothing else")))

		By("IPAMConfiguration default: strictAffinity only")
		ipam = &calicov3.IPAMConfiguration{ObjectMeta: metav1.ObjectMeta{Name: calico.IPAMConfigName}}
		Expect(managerPatch(ipam, types.MergePatchType, `{"spec":{"strictAffinity":true}}`)).To(Succeed())
		Expect(managerPatch(ipam, types.MergePatchType, `{"spec":{"maxBlocksPerHost":1}}`)).
			To(MatchError(ContainSubstring("only strictAffinity")))
		Expect(managerPatch(ipam, types.MergePatchType, `{"spec":{"autoAllocateBlocks":false}}`)).
			To(MatchError(ContainSubstring("only strictAffinity")))
	})
})
