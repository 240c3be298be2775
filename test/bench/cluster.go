package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
)

// The bench's cluster: its flags, its control plane and clients, and the
// seeded nodes it measures on.

const operatorNamespace = "winready-system"

type config struct {
	sizes       []int
	rolloutStep time.Duration
	statusLag   time.Duration
	quiet       time.Duration
	winready    string
	winreadyLog string
	kubectl     string
	workdir     string
	// migration and rounds choose the measurements; nameLen is the length
	// of the node names of the rounds' clusters.
	migration, rounds bool
	nameLen           int
	skipProbe         bool
}

// newClient is a client of the bench's control plane with winready's scheme.
func newClient(restCfg *rest.Config) (*runtime.Scheme, client.WithWatch, error) {
	scheme, err := controllers.NewScheme()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	return scheme, c, err
}

// newEnvironment is the control plane, configured to write every request
// auditPolicy records to auditLog.
func newEnvironment(workdir, auditLog string) (*kit.Env, error) {
	policy := filepath.Join(workdir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	env, err := kit.Environment(kit.Options{CalicoCRDs: filepath.Join("bin", "crds")})
	if err != nil {
		return nil, err
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", auditLog)
	args.Set("audit-log-mode", "blocking")
	// The scale of a large cluster: the simulator and winready are clients
	// like any other.
	args.Set("max-requests-inflight", "1000")
	return env, nil
}

// writeKubeconfigs writes a kubeconfig into workdir for each of the users
// winready and runbook (cluster admins, told apart in the audit log) and
// returns their paths by user.
func writeKubeconfigs(env *kit.Env, restCfg *rest.Config, workdir string) (map[string]string, error) {
	kubeconfigs := map[string]string{}
	for _, user := range []string{"winready", "runbook"} {
		u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, restCfg)
		if err != nil {
			return nil, err
		}
		kc, err := u.KubeConfig()
		if err != nil {
			return nil, err
		}
		kubeconfigs[user] = filepath.Join(workdir, user+".kubeconfig")
		if err := os.WriteFile(kubeconfigs[user], kc, 0o600); err != nil {
			return nil, err
		}
	}
	return kubeconfigs, nil
}

func seed(ctx context.Context, c client.Client, n int) error {
	if err := clean(ctx, c); err != nil {
		return err
	}
	// A /12 of /26 blocks: one block per node under strictAffinity for 5,000
	// nodes and more, as a cluster of that size has (a /16 holds 1,024).
	cl := calicosim.MainClusterOf(n)
	cl.Pools[0].CIDR = "172.16.0.0/12"
	if err := calicosim.Seed(ctx, c, cl); err != nil {
		return err
	}
	return calicosim.WaitSettled(ctx, c, 10*time.Minute)
}

func clean(ctx context.Context, c client.Client) error {
	// winready is stopped between sizes: its finalizer and claims are
	// lifted here, as it would lift them.
	if err := kit.ForgetWindowsReadiness(ctx, c, operatorNamespace); err != nil {
		return err
	}
	// The record of the originals outlives its WindowsReadiness: left
	// there, the next size's migration would stop on a record it did not
	// write.
	rec := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: record.Name}}
	if err := client.IgnoreNotFound(c.Delete(ctx, rec)); err != nil {
		return err
	}
	// Thousands of nodes go in one collection delete, not one request each
	// within Clean's time limit; Clean then finds none left.
	if err := c.DeleteAllOf(ctx, &corev1.Node{}); err != nil {
		return err
	}
	return calicosim.Clean(ctx, c)
}

func serviceCIDR(ctx context.Context, c client.Client) (string, error) {
	list := &networkingv1.ServiceCIDRList{}
	if err := c.List(ctx, list); err != nil {
		return "", err
	}
	for _, sc := range list.Items {
		if len(sc.Spec.CIDRs) > 0 {
			return sc.Spec.CIDRs[0], nil
		}
	}
	return "", errors.New("no ServiceCIDR")
}

// bench is what every measurement shares: the uncached client, the
// simulator, the users' kubeconfigs and the API server's audit log.
type bench struct {
	c           client.WithWatch
	sim         *calicosim.Simulator
	kubeconfigs map[string]string
	auditLog    string
	// restCfg is the control plane's admin; agents the simulated agents'
	// identity.
	restCfg, agents *rest.Config
}

// calicoNode names the DaemonSet whose rollouts are counted.
const calicoNodeNS, calicoNodeName = "calico-system", "calico-node"

// probeNamespace is where winready runs its rounds (its default).
const probeNamespace = "winready-probe"
