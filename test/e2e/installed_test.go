package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"context"
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/test/install"
)

// managerDeployment is the Deployment config/default runs the manager with.
const managerDeployment = "winready-manager"

// manifestOf is winready as a platform team installs it: the release's
// install.yaml when E2E_MANIFEST names one (make e2e does when dist/ holds a
// release), its Helm chart when E2E_MANIFEST is chart or a chart package
// (chartManifest), else config/default as kustomize builds it, from the
// checkout at root.
func manifestOf(root string) ([]*unstructured.Unstructured, error) {
	path := os.Getenv("E2E_MANIFEST")
	switch {
	case path == "" || root != repoRoot:
		return install.Build(filepath.Join(root, "config", "default"))
	case isChart(path):
		return chartManifest()
	}
	return install.ReadManifest(path)
}

// installWinready applies the manifest as `kubectl apply` does and returns
// its manager Deployment. The Deployment is applied with no replicas: this
// suite runs its pod itself (runAsInstalled), and the real backend's
// scheduler would otherwise place pods on kwok nodes, where nothing runs.
func installWinready(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (*appsv1.Deployment, error) {
	var dep *appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != managerDeployment {
			continue
		}
		dep = &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, dep); err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedField(o.Object, int64(0), "spec", "replicas"); err != nil {
			return nil, err
		}
	}
	if dep == nil {
		return nil, fmt.Errorf("the manifest has no Deployment %s", managerDeployment)
	}
	if err := install.CreateNamespacesOf(ctx, c, objs); err != nil {
		return nil, err
	}
	return dep, install.Apply(ctx, c, objs)
}

// runAsInstalled runs bin as the Deployment's manager container runs: its
// arguments, its environment and nothing else, authenticated as its
// ServiceAccount with a token from the TokenRequest API. KUBECONFIG holds
// that token: it stands in for the token a pod has mounted, and is read only
// where in-cluster configuration would be. extra arguments come last.
func runAsInstalled(ctx context.Context, c client.Client, cfg *rest.Config, dep *appsv1.Deployment, name, bin string, extra ...string) (*process, error) {
	var manager *corev1.Container
	for i := range dep.Spec.Template.Spec.Containers {
		if ct := &dep.Spec.Template.Spec.Containers[i]; ct.Name == "manager" {
			manager = ct
		}
	}
	if manager == nil {
		return nil, fmt.Errorf("Deployment %s has no manager container", dep.Name)
	}
	kubeconfig, err := serviceAccountKubeconfig(ctx, c, cfg, dep.Namespace, dep.Spec.Template.Spec.ServiceAccountName, name)
	if err != nil {
		return nil, err
	}
	env := []string{"KUBECONFIG=" + kubeconfig}
	for _, e := range manager.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("env %s of the manager comes from %v, which this suite cannot play", e.Name, e.ValueFrom)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	args := append(append(manager.Command[:len(manager.Command):len(manager.Command)], manager.Args...), extra...)
	return startProcessIn(name, logDir, env, bin, args...)
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount with a token the API server issues for it.
func serviceAccountKubeconfig(ctx context.Context, c client.Client, cfg *rest.Config, ns, sa, name string) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(4 * 3600))}}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
	if err := c.SubResource("token").Create(ctx, account, req); err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", ns, sa, err)
	}
	return writeKubeconfig(cfg, name, &clientcmdapi.AuthInfo{Token: req.Status.Token})
}

// writeKubeconfig writes name.kubeconfig into the log directory: cfg's API
// server and auth, and returns its path.
func writeKubeconfig(cfg *rest.Config, name string, auth *clientcmdapi.AuthInfo) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = auth
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name}
	kc.CurrentContext = name
	path := filepath.Join(logDir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// stolenManagerClient is a client holding a token of the manager's
// ServiceAccount, as someone who took it from the manager's pod would, who
// writes under winready's own field manager as winready does.
func stolenManagerClient() client.Client {
	GinkgoHelper()
	path, err := serviceAccountKubeconfig(ctx, k8s, cfg, manager.Namespace, manager.Spec.Template.Spec.ServiceAccountName, "stolen")
	Expect(err).NotTo(HaveOccurred())
	restCfg, err := clientcmd.BuildConfigFromFlags("", path)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return client.WithFieldOwner(c, "winready")
}
