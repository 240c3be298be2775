package plugin

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

// TestARollbackRefusedToAnEditorNamesTheAdminRole runs rollback as a user
// bound to winready-editor, under the admission policy
// winready-admin-changes as config/admission ships it: RBAC lets the patch
// through, the policy refuses it, and the plugin names winready-admin, not
// the editor role the user already holds.
func TestARollbackRefusedToAnEditorNamesTheAdminRole(t *testing.T) {
	seed(t)
	ctx := context.Background()
	f, err := os.Open(filepath.Join("..", "..", "config", "admission", "people.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), u) })
	}
	bindRoles(t, ctx, map[string]string{"rollback-editor": "winready-editor"})
	editor := userConfig(t, "rollback-editor")
	// The binding and the policy reach the API server's informers a moment
	// after they are created: wait until a dry run of the rollback is
	// refused by the policy.
	c, err := client.New(editor, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		err := c.Patch(ctx, &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"direction":"Rollback"}}`)), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+adminPolicy+"'"), nil
	}); err != nil {
		t.Fatalf("the policy %s never refused the editor's rollback: %v", adminPolicy, err)
	}
	code, _, stderr := runCodeWith(t, editor, "rollback", "--yes")
	if code != ExitForbidden {
		t.Errorf("rollback as an editor: exit status %d, want %d; stderr:\n%s", code, ExitForbidden, stderr)
	}
	if !strings.Contains(stderr, "The ClusterRole winready-admin grants it") ||
		!strings.Contains(stderr, "--clusterrole=winready-admin") {
		t.Errorf("the refusal does not name winready-admin:\n%s", stderr)
	}
	wr := &v1alpha1.WindowsReadiness{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr); err != nil {
		t.Fatal(err)
	}
	if wr.Spec.Direction == v1alpha1.DirectionRollback {
		t.Error("the refused rollback changed the spec")
	}
}
