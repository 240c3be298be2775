package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/config/admission"
)

// boundsPoll is how often the manager looks again for the admission
// policies it waits for.
const boundsPoll = 2 * time.Second

// missingBounds lists the admission policies and bindings of this build
// (config/admission) that the cluster lacks or is deleting, as
// "policy <name>" and "binding <name>", sorted.
func missingBounds(ctx context.Context, cs kubernetes.Interface, want admission.Objects) ([]string, error) {
	api := cs.AdmissionregistrationV1()
	kinds := []struct {
		kind  string
		names []string
		get   func(name string) (metav1.Object, error)
	}{
		{"policy", want.Policies, func(name string) (metav1.Object, error) {
			return api.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		}},
		{"binding", want.Bindings, func(name string) (metav1.Object, error) {
			return api.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		}},
	}
	var missing []string
	for _, k := range kinds {
		for _, name := range k.names {
			obj, err := k.get(name)
			switch {
			case apierrors.IsNotFound(err):
				missing = append(missing, k.kind+" "+name)
			case err != nil:
				return nil, fmt.Errorf("reading admission %s %s: %w", k.kind, name, err)
			case obj.GetDeletionTimestamp() != nil:
				missing = append(missing, k.kind+" "+name+" (being deleted)")
			}
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// waitForBounds holds the manager back until every admission policy and
// binding this build installs exists: until then it makes no request that
// writes, no Lease, no Event, no status. The policies are what bound the
// manager's writes, and no installer orders them first: Helm creates kinds it
// does not know (admission policies among them) after the Deployment, and a
// GitOps tool may sync them in any order. While it waits it serves the
// health probes on addr, alive and not ready, the readiness answer naming
// what is missing; it returns once nothing is, or with ctx's error.
func waitForBounds(ctx context.Context, cfg *rest.Config, addr string, log logr.Logger) error {
	want, err := admission.Names()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// What the wait last found missing, for /readyz and the log.
	var waiting atomic.Pointer[string]
	waiting.Store(ptr.To("not yet looked"))
	stop, err := serveWaiting(addr, func() string { return *waiting.Load() })
	if err != nil {
		return err
	}
	defer stop()
	return wait.PollUntilContextCancel(ctx, boundsPoll, true, func(ctx context.Context) (bool, error) {
		missing, err := missingBounds(ctx, cs, want)
		if err != nil {
			// A read the API server refuses or fails is logged and tried
			// again: the manager's RBAC may be applied after its
			// Deployment too.
			log.Error(err, "looking for winready's admission policies")
			waiting.Store(ptr.To(err.Error()))
			return false, nil
		}
		now := strings.Join(missing, ", ")
		if was := waiting.Swap(&now); *was != now && now != "" {
			log.Info("waiting for winready's admission policies before any write; install them with the rest of winready (config/admission)",
				"missing", missing)
		}
		return len(missing) == 0, nil
	})
}

// serveWaiting answers the health probes on addr while the manager waits:
// /healthz is ok, /readyz is 503 with what it waits for. addr "0" serves
// nothing, as the manager's own flag means. stop closes the listener, so
// that the manager can bind the address next.
func serveWaiting(addr string, waiting func() string) (stop func(), err error) {
	if addr == "0" || addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving the health probes on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "waiting for winready's admission policies: %s\n", waiting())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Serve returns ErrServerClosed once stop shuts it down.
		_ = srv.Serve(ln)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
