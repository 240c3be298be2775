package admission_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

const adminPolicy = "winready-admin-changes"

// People steer a migration with spec patches: RBAC grants the whole spec to
// winready-editor, and the policy winready-admin-changes keeps the rollback
// and the acknowledgements for winready-admin.
var _ = Describe("What winready-editor and winready-admin may change", Ordered, func() {
	var editor, admin client.Client

	BeforeAll(func() {
		for _, role := range []string{"winready-editor", "winready-admin"} {
			binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role + "-person"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: role + "-person"}}}
			Expect(k8s.Create(ctx, binding)).To(Succeed())
			DeferCleanup(func() { Expect(k8s.Delete(ctx, binding)).To(Succeed()) })
		}
		editor = as("winready-editor-person", "system:authenticated")
		admin = as("winready-admin-person", "system:authenticated")
		setWR()
		DeferCleanup(noWR)
		// The authorizer sees a binding once its informer has it.
		Eventually(func() error { return patchSpec(admin, `{"spec":{"paused":true}}`) }).Should(Succeed())
		Eventually(func() error { return patchSpec(editor, `{"spec":{"paused":true}}`) }).Should(Succeed())
	})

	It("lets the editor approve, pause and resume, and keeps the rollback for the admin", func() {
		Expect(patchSpec(editor, `{"spec":{"paused":false,"approvedSteps":["BGP"]}}`)).To(Succeed())
		Expect(patchSpec(editor, `{"spec":{"direction":"Rollback"}}`)).To(And(refusedBy(adminPolicy),
			MatchError(ContainSubstring("winready-editor-person lacks the verb rollback")),
			MatchError(ContainSubstring("ClusterRole winready-admin"))))
		Expect(patchSpec(admin, `{"spec":{"direction":"Rollback"}}`)).To(Succeed())
	})

	It("keeps a new acknowledgement for the admin, and lets the editor remove one", func() {
		Expect(patchSpec(editor, `{"spec":{"preflight":{"acknowledge":["BGPPeers"]}}}`)).To(And(refusedBy(adminPolicy),
			MatchError(ContainSubstring("acknowledging BGPPeers"))))
		setWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.Acknowledge = []v1alpha1.Acknowledgement{v1alpha1.AcknowledgeBGPPeers}
		})
		Expect(patchSpec(editor, `{"spec":{"paused":true}}`)).To(Succeed(), "an acknowledgement already there is no new decision")
		Expect(patchSpec(editor, `{"spec":{"preflight":{"acknowledge":["BGPPeers","ForeignRecord"]}}}`)).
			To(MatchError(ContainSubstring("acknowledging ForeignRecord")))
		Expect(patchSpec(admin, `{"spec":{"preflight":{"acknowledge":["BGPPeers","ForeignRecord"]}}}`)).To(Succeed())
		Expect(patchSpec(editor, `{"spec":{"preflight":{"acknowledge":null}}}`)).To(Succeed())
	})
})

// patchSpec sends a merge patch of WindowsReadiness default as c, in a dry run.
func patchSpec(c client.Client, patch string) error {
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	return c.Patch(ctx, wr, client.RawPatch("application/merge-patch+json", []byte(patch)), client.DryRunAll)
}
