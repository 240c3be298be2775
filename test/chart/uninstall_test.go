package chart

import (
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestHelmUpgradeAndUninstallKeepWhatTheMigrationNeeds installs the chart
// with the Helm SDK on a real API server, as helm install does, writes the
// record of the originals a migration keeps in winready-system, upgrades
// the release and uninstalls it: the release's objects go, and the
// namespace, the record and the CRD stay.
func TestHelmUpgradeAndUninstallKeepWhatTheMigrationNeeds(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset: make chart-test sets it to the envtest control plane")
	}
	dir, _ := release(t)
	c := loadChart(t, dir)
	ctx := t.Context()

	env := startEnv(t)
	// Helm reads a kubeconfig, as the helm command does.
	user, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	namespace := "default"
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &path, &namespace
	helm := new(action.Configuration)
	if err := helm.Init(flags, namespace, "memory", t.Logf); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	k8s, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// winready's Roles live in Calico's namespaces, which a Calico install
	// made before winready's.
	for _, ns := range []string{"calico-system", "tigera-operator"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	install := action.NewInstall(helm)
	install.ReleaseName, install.Namespace = "winready", namespace
	if _, err := install.RunWithContext(ctx, c, nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	// A migration under way: the record of the originals, which no chart
	// renders.
	rec := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "winready-system", Name: "winready-originals"},
		Data: map[string]string{"originals.json": "{}"}}
	if err := k8s.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	upgrade := action.NewUpgrade(helm)
	upgrade.Namespace = namespace
	if _, err := upgrade.RunWithContext(ctx, "winready", c, map[string]any{"replicas": 3}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	dep := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "winready-system", Name: "winready-manager"}, dep); err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("after helm upgrade, replicas %v, want 3", dep.Spec.Replicas)
	}

	res, err := action.NewUninstall(helm).Run("winready")
	if err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	t.Logf("helm uninstall: %s", res.Info)
	// envtest runs no namespace controller: a deleted namespace would stay
	// Terminating with its objects, so the namespace itself must not be
	// deleted at all.
	for _, kept := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "winready-system"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "winready-probe"}},
		rec,
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "windowsreadinesses.winready.io"}},
	} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(kept), kept); err != nil {
			t.Errorf("after helm uninstall, %T %s: %v", kept, kept.GetName(), err)
		} else if kept.GetDeletionTimestamp() != nil {
			t.Errorf("helm uninstall deletes %T %s", kept, kept.GetName())
		}
	}
	for _, gone := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "winready-system", Name: "winready-manager"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "winready-editor"}},
	} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(gone), gone); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, %T %s: %v, want it gone", gone, gone.GetName(), err)
		}
	}
}
