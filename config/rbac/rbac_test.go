// Package rbac holds the tests of the ClusterRoles config/rbac ships for
// people: what each allows and refuses, asked of a real API server.
package rbac

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/test/kit"
)

// clusterRoles decodes every ClusterRole in file.
func clusterRoles(t *testing.T, file string) map[string]*rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*rbacv1.ClusterRole{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(doc), role); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if role.Kind != "ClusterRole" {
			t.Fatalf("%s holds a %s, want only ClusterRoles", file, role.Kind)
		}
		out[role.Name] = role
	}
	return out
}

// access is one request a role is asked about.
type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	s := a.verb + " " + a.resource
	if a.subresource != "" {
		s += "/" + a.subresource
	}
	if a.group != "" {
		s += "." + a.group
	}
	if a.namespace != "" {
		s += " in " + a.namespace
	}
	if a.name != "" {
		s += " named " + a.name
	}
	return s
}

const wr = "windowsreadinesses"

// reads are what the viewer and the editor may both do.
var reads = []access{
	{verb: "get", group: "winready.io", resource: wr, name: "default"},
	{verb: "list", group: "winready.io", resource: wr},
	{verb: "watch", group: "winready.io", resource: wr},
	{verb: "get", group: "winready.io", resource: wr, subresource: "status", name: "default"},
	{verb: "list", resource: "events", namespace: "default"},
	{verb: "watch", group: "events.k8s.io", resource: "events", namespace: "default"},
}

// specWrites are what only the editor and the admin may do.
var specWrites = []access{
	{verb: "patch", group: "winready.io", resource: wr, name: "default"},
	{verb: "update", group: "winready.io", resource: wr, name: "default"},
}

// adminDecisions are the verbs the admission policy winready-admin-changes
// asks for before a rollback or an acknowledgement: the admin's alone.
var adminDecisions = []access{
	{verb: "rollback", group: "winready.io", resource: wr, name: "default"},
	{verb: "acknowledge", group: "winready.io", resource: wr, name: "default"},
}

// neverPeople are refused to every role for people: the status is the
// manager's, creating or deleting a migration is the administrators'.
var neverPeople = []access{
	{verb: "create", group: "winready.io", resource: wr},
	{verb: "delete", group: "winready.io", resource: wr, name: "default"},
	{verb: "deletecollection", group: "winready.io", resource: wr},
	{verb: "patch", group: "winready.io", resource: wr, subresource: "status", name: "default"},
	{verb: "update", group: "winready.io", resource: wr, subresource: "status", name: "default"},
	{verb: "create", resource: "events", namespace: "default"},
	{verb: "get", resource: "secrets", namespace: "winready-system", name: "x"},
	{verb: "patch", group: "operator.tigera.io", resource: "installations", name: "default"},
}

// planReads are the reads winready plan makes (TestPlan in internal/cli runs
// it under the role); planRefused is a sample of what it must not do.
var planReads = []access{
	{verb: "get", group: "operator.tigera.io", resource: "installations", name: "default"},
	{verb: "get", group: "operator.tigera.io", resource: "installations", name: "overlay"},
	{verb: "get", group: "operator.tigera.io", resource: "tigerastatuses", name: "calico"},
	{verb: "list", group: "operator.tigera.io", resource: "imagesets"},
	{verb: "list", resource: "nodes"},
	{verb: "list", group: "apps", resource: "daemonsets"},
	{verb: "get", group: "apps", resource: "daemonsets", namespace: "calico-system", name: "calico-node"},
	{verb: "list", group: "networking.k8s.io", resource: "servicecidrs"},
	{verb: "list", group: "networking.k8s.io", resource: "networkpolicies"},
	{verb: "get", resource: "configmaps", namespace: "kube-system", name: "kubeadm-config"},
	{verb: "get", resource: "configmaps", namespace: "kube-public", name: "cluster-info"},
	{verb: "get", resource: "configmaps", namespace: "default", name: "kube-root-ca.crt"},
	{verb: "get", resource: "configmaps", namespace: "tigera-operator", name: "kubernetes-services-endpoint"},
	{verb: "get", resource: "services", namespace: "kube-system", name: "kube-dns"},
	{verb: "list", group: "discovery.k8s.io", resource: "endpointslices", namespace: "default"},
	{verb: "get", group: "projectcalico.org", resource: "felixconfigurations", name: "default"},
	{verb: "get", group: "projectcalico.org", resource: "ipamconfigurations", name: "default"},
	{verb: "list", group: "projectcalico.org", resource: "ippools"},
	{verb: "list", group: "projectcalico.org", resource: "globalnetworkpolicies"},
	{verb: "list", group: "crd.projectcalico.org", resource: "ipamblocks"},
}

var planRefused = []access{
	{verb: "patch", group: "operator.tigera.io", resource: "installations", name: "default"},
	{verb: "list", group: "operator.tigera.io", resource: "installations"},
	{verb: "watch", resource: "nodes"},
	{verb: "get", resource: "secrets", namespace: "kube-system", name: "x"},
	{verb: "list", resource: "configmaps", namespace: "kube-system"},
	{verb: "get", resource: "configmaps", namespace: "kube-system", name: "coredns"},
	{verb: "get", group: "apps", resource: "daemonsets", namespace: "kube-system", name: "kube-proxy"},
	{verb: "patch", group: "apps", resource: "daemonsets", namespace: "calico-system", name: "calico-node"},
	{verb: "get", group: "projectcalico.org", resource: "ipamconfigurations", name: "other"},
	{verb: "create", group: "projectcalico.org", resource: "ipamconfigurations"},
	{verb: "get", group: "winready.io", resource: wr, name: "default"},
}

// TestRolesForPeople binds each role to a user of its own on envtest and asks
// the API server's authorizer, with SubjectAccessReviews, what the user may do.
func TestRolesForPeople(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset: point it at the envtest binaries, e.g. KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.37.2 (make envtest-assets)")
	}
	roles := clusterRoles(t, "user_roles.yaml")
	for name, role := range clusterRoles(t, "plan_role.yaml") {
		roles[name] = role
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs, NoWinreadyCRD: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, role := range roles {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name + "-user"}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	allowed := func(user string, a access) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource,
				Subresource: a.subresource, Namespace: a.namespace, Name: a.name}}}
		res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		return res.Status.Allowed
	}
	// The authorizer sees a binding once its informer has it: wait for the
	// first allowed request of each role.
	for name, first := range map[string]access{"winready-viewer": reads[0], "winready-editor": specWrites[0],
		"winready-admin": adminDecisions[0], "winready-plan": planReads[0]} {
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return allowed(name+"-user", first), nil
		}); err != nil {
			t.Fatalf("%s never allowed %s: %v", name, first, err)
		}
	}

	check := func(t *testing.T, role string, allow, refuse [][]access) {
		for _, list := range allow {
			for _, a := range list {
				if !allowed(role+"-user", a) {
					t.Errorf("%s refuses %s", role, a)
				}
			}
		}
		for _, list := range refuse {
			for _, a := range list {
				if allowed(role+"-user", a) {
					t.Errorf("%s allows %s", role, a)
				}
			}
		}
	}
	t.Run("the viewer reads WindowsReadiness and its Events, and changes nothing", func(t *testing.T) {
		check(t, "winready-viewer", [][]access{reads}, [][]access{specWrites, adminDecisions, neverPeople})
	})
	t.Run("the editor also patches and updates the spec, not the status, and decides no rollback", func(t *testing.T) {
		check(t, "winready-editor", [][]access{reads, specWrites}, [][]access{adminDecisions, neverPeople})
	})
	t.Run("the admin also decides a rollback and an acknowledgement", func(t *testing.T) {
		check(t, "winready-admin", [][]access{reads, specWrites, adminDecisions}, [][]access{neverPeople})
	})
	t.Run("the plan role reads what winready plan reads, and writes nothing", func(t *testing.T) {
		check(t, "winready-plan", [][]access{planReads}, [][]access{planRefused, specWrites, adminDecisions})
	})

	// envtest runs no kube-controller-manager, whose aggregation controller
	// copies the rules: check that the built-in roles' own selectors pick
	// ours, as that controller would.
	t.Run("the viewer is aggregated to view; the editor and the admin to nothing", func(t *testing.T) {
		for _, builtin := range []string{"view", "edit", "admin"} {
			cr, err := cs.RbacV1().ClusterRoles().Get(ctx, builtin, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cr.AggregationRule == nil {
				t.Fatalf("ClusterRole %s has no aggregationRule", builtin)
			}
			picked := map[string]bool{}
			for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					t.Fatal(err)
				}
				for name, role := range roles {
					if s.Matches(labels.Set(role.Labels)) {
						picked[name] = true
					}
				}
			}
			if builtin == "view" && !picked["winready-viewer"] {
				t.Errorf("view's aggregationRule does not pick winready-viewer")
			}
			for _, never := range []string{"winready-plan", "winready-editor", "winready-admin"} {
				if picked[never] {
					t.Errorf("%s's aggregationRule picks %s: every %s of a namespace would get it", builtin, never, builtin)
				}
			}
		}
	})
}
