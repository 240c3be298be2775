package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spf13/cobra"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/config/admission"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/version"
)

// The manager's Deployment as config/manager names it: install.yaml puts it
// there whatever namespace the kubeconfig's context names.
const (
	managerNamespace  = "winready-system"
	managerDeployment = "winready-manager"
)

// verdict is one line of check: a Fail names what to do in Fix.
type verdict struct {
	Name    string               `json:"name"`
	Result  v1alpha1.CheckResult `json:"result"`
	Message string               `json:"message"`
	Fix     string               `json:"fix,omitempty"`
}

// checkReport is what check -o json|yaml prints.
type checkReport struct {
	// Stage is "pre" (before install, --pre) or "installed".
	Stage  string    `json:"stage"`
	Checks []verdict `json:"checks"`
	Passed bool      `json:"passed"`
}

// failed names the checks that failed.
func (ch *checker) failed() []string {
	var failed []string
	for _, v := range ch.verdicts {
		if v.Result == v1alpha1.CheckFail {
			failed = append(failed, v.Name)
		}
	}
	return failed
}

func checkCommand(o *options) *cobra.Command {
	var pre bool
	var output string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that the cluster can take winready (--pre), or that winready is installed and working",
		Long: "With --pre, before installing: the Kubernetes version against the one winready needs (" + version.MinKubernetes +
			" or newer), the Tigera operator (the Installation CRD served, Installation default present), the Calico " +
			"version as the preflight judges it, and whether you may create what install.yaml holds (CRDs, admission " +
			"policies, ClusterRoles).\n\nWithout it, after installing: the WindowsReadiness CRD served at " +
			v1alpha1.GroupVersion.Version + ", the manager's Deployment available, the admission policies and bindings " +
			"of this release present, and whether you may read and change the WindowsReadiness.\n\n" +
			"Exit status: 0 every check passes (warnings allowed); 9 a check fails, each failing line names the fix; " +
			"3, 8 and the rest of the table when a request fails (docs/operating.md).",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" && output != "yaml" {
				return errUnknownOutput(output)
			}
			cfg, err := o.config()
			if err != nil {
				return err
			}
			ch, err := newChecker(boundedRequests(cfg))
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// One request before the checks: a cluster that does not answer,
			// or answers 401, ends here with its own status instead of a
			// column of identical failures.
			server, err := ch.cs.Discovery().ServerVersion()
			if err != nil {
				return fmt.Errorf("reading the server's version: %w", err)
			}
			report := checkReport{Stage: "installed"}
			if pre {
				report.Stage = "pre"
				ch.pre(ctx, server.GitVersion)
			} else {
				ch.installed(ctx)
			}
			report.Checks = ch.verdicts
			failed := ch.failed()
			report.Passed = len(failed) == 0 && ch.err == nil
			if output == "table" {
				printVerdicts(o.streams.Out, report)
			} else if _, err := printAs(o.streams.Out, output, report); err != nil {
				return err
			}
			// A request that failed says more than the checks it left
			// undecided: a 403 is 8 with the role to bind, as everywhere.
			if ch.err != nil {
				return ch.err
			}
			if len(failed) > 0 {
				return withCode(ExitCheckFailed, fmt.Errorf("%d of %d checks failed: %s", len(failed), len(ch.verdicts),
					strings.Join(failed, ", ")))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&pre, "pre", false, "check the cluster before installing winready")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	return cmd
}

// checker runs the checks and keeps their verdicts, and the first request
// that failed.
type checker struct {
	cs       kubernetes.Interface
	c        client.Client
	verdicts []verdict
	err      error
}

// boundedRequests bounds each request as plan does: a check or a version
// asked of a cluster that swallows packets ends instead of hanging.
func boundedRequests(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = planRequestTimeout
	return cfg
}

func newChecker(cfg *rest.Config) (*checker, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	scheme, err := schemeOf()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &checker{cs: cs, c: c}, nil
}

func (ch *checker) add(v verdict) { ch.verdicts = append(ch.verdicts, v) }

func (ch *checker) pass(name, format string, a ...any) {
	ch.add(verdict{Name: name, Result: v1alpha1.CheckPass, Message: fmt.Sprintf(format, a...)})
}

func (ch *checker) fail(name, fix, format string, a ...any) {
	ch.add(verdict{Name: name, Result: v1alpha1.CheckFail, Message: fmt.Sprintf(format, a...), Fix: fix})
}

// undecided records a check whose request failed: its line says so, and the
// command ends with the request's exit status once every line is printed.
func (ch *checker) undecided(name string, err error) {
	ch.add(verdict{Name: name, Result: v1alpha1.CheckFail, Message: "cannot tell: " + err.Error()})
	if ch.err == nil {
		ch.err = err
	}
}

// serves is whether the API server serves resource in groupVersion; a group
// it does not know is a no, any other error is the request's.
func (ch *checker) serves(groupVersion, resource string) (bool, error) {
	list, err := ch.cs.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}

// access asks the API server whether the caller may verb resource.group, as
// the authorizer would decide the request itself (SelfSubjectAccessReview:
// no right is needed to ask).
func (ch *checker) access(ctx context.Context, verb, group, resource string) (bool, string, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource}}}
	res, err := ch.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, "", request("create", "selfsubjectaccessreviews.authorization.k8s.io", err)
	}
	return res.Status.Allowed, res.Status.Reason, nil
}

// installerAccess is what applying install.yaml needs beyond the ordinary:
// its CRD, its admission policies and its ClusterRoles (creating a
// ClusterRole that grants more than one holds needs escalate too, which
// cluster-admin has).
var installerAccess = []struct{ name, group, resource string }{
	{"MayCreateCRDs", "apiextensions.k8s.io", "customresourcedefinitions"},
	{"MayCreateAdmissionPolicies", "admissionregistration.k8s.io", "validatingadmissionpolicies"},
	{"MayCreateClusterRoles", "rbac.authorization.k8s.io", "clusterroles"},
}

// kubernetesVersion judges the server's version against the oldest minor
// winready runs on; a version it cannot read (a vendor's own numbering) is a
// warning, not a refusal.
func kubernetesVersion(serverVersion string) verdict {
	const name = "KubernetesVersion"
	v, err := k8sversion.ParseGeneric(serverVersion)
	if err != nil {
		return verdict{Name: name, Result: v1alpha1.CheckWarn,
			Message: fmt.Sprintf("Kubernetes %q is not a version winready can read: it needs %s or newer", serverVersion, version.MinKubernetes)}
	}
	if k8sversion.MajorMinor(v.Major(), v.Minor()).LessThan(k8sversion.MustParseGeneric(version.MinKubernetes)) {
		return verdict{Name: name, Result: v1alpha1.CheckFail,
			Message: fmt.Sprintf("Kubernetes %s is older than %s: winready needs ValidatingAdmissionPolicy v1 and the CEL CIDR library",
				serverVersion, version.MinKubernetes),
			Fix: "upgrade the cluster to Kubernetes " + version.MinKubernetes + " or newer (docs/install.md)"}
	}
	return verdict{Name: name, Result: v1alpha1.CheckPass,
		Message: fmt.Sprintf("Kubernetes %s (winready needs %s or newer)", serverVersion, version.MinKubernetes)}
}

// pre runs the checks before install on a server at serverVersion.
func (ch *checker) pre(ctx context.Context, serverVersion string) {
	ch.add(kubernetesVersion(serverVersion))

	const crd, inst = "TigeraOperator", "Installation"
	installFix := "winready migrates a Calico installed by the Tigera operator: install Calico with it (docs/install.md)"
	served, err := ch.serves(operatorv1.GroupVersion.String(), "installations")
	switch {
	case err != nil:
		ch.undecided(crd, err)
	case !served:
		ch.fail(crd, installFix, "the API server does not serve %s installations", operatorv1.GroupVersion)
	default:
		ch.pass(crd, "the API server serves %s installations", operatorv1.GroupVersion)
		installation := &operatorv1.Installation{}
		err := ch.c.Get(ctx, client.ObjectKey{Name: "default"}, installation)
		switch {
		case apierrors.IsNotFound(err):
			ch.fail(inst, installFix, "no Installation default: the Tigera operator installs Calico from it")
		case err != nil:
			ch.undecided(inst, request("get", "installations.operator.tigera.io", err))
		default:
			ch.pass(inst, "Installation default exists")
			// The preflight's own judgement, so that check --pre and the
			// migration never disagree on a version.
			c := preflight.CalicoVersionOf(installation, v1alpha1.PreflightSpec{})
			if c.Result == v1alpha1.CheckInfo {
				c.Result = v1alpha1.CheckPass
			}
			ch.add(verdict{Name: c.Name, Result: c.Result, Message: c.Message})
		}
	}

	for _, a := range installerAccess {
		name := a.name
		allowed, reason, err := ch.access(ctx, "create", a.group, a.resource)
		switch {
		case err != nil:
			ch.undecided(name, err)
		case !allowed:
			ch.fail(name, "install.yaml is applied by a cluster admin: ask for cluster-admin, or ask one to apply it",
				"you may not create %s.%s%s", a.resource, a.group, because(reason))
		default:
			ch.pass(name, "you may create %s.%s", a.resource, a.group)
		}
	}
}

// installed runs the checks after install.
func (ch *checker) installed(ctx context.Context) {
	installFix := "install winready: kubectl apply -f " + installURL()

	const crd = "WindowsReadinessCRD"
	served, err := ch.serves(v1alpha1.GroupVersion.String(), "windowsreadinesses")
	switch {
	case err != nil:
		ch.undecided(crd, err)
	case !served:
		ch.fail(crd, installFix, "the API server does not serve %s windowsreadinesses", v1alpha1.GroupVersion)
	default:
		ch.pass(crd, "the API server serves %s windowsreadinesses", v1alpha1.GroupVersion)
	}

	const mgr = "Manager"
	dep, err := ch.cs.AppsV1().Deployments(managerNamespace).Get(ctx, managerDeployment, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		ch.fail(mgr, installFix, "no Deployment %s/%s", managerNamespace, managerDeployment)
	case err != nil:
		ch.undecided(mgr, request("get", "deployments.apps", err))
	default:
		available, why := deploymentAvailable(dep)
		if available {
			ch.pass(mgr, "Deployment %s/%s available, %d of %d replicas ready", managerNamespace, managerDeployment,
				dep.Status.ReadyReplicas, replicas(dep))
		} else {
			ch.fail(mgr, fmt.Sprintf("see why: kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s",
				managerNamespace, managerDeployment, managerNamespace, managerDeployment),
				"Deployment %s/%s is not available (%d of %d replicas ready): %s", managerNamespace, managerDeployment,
				dep.Status.ReadyReplicas, replicas(dep), why)
		}
	}

	ch.admission(ctx, installFix)

	for _, a := range []struct {
		verb, fix string
		result    v1alpha1.CheckResult
	}{
		// A person who only watches needs get; approve, pause, resume and
		// rollback need patch, which a viewer lacks by design: a warning.
		{"get", "ask for a ClusterRoleBinding to winready-viewer (config/rbac)", v1alpha1.CheckFail},
		{"patch", "to approve, pause, resume or roll back, ask for a ClusterRoleBinding to winready-editor (config/rbac)", v1alpha1.CheckWarn},
	} {
		name := "May" + strings.ToUpper(a.verb[:1]) + a.verb[1:] + "WindowsReadiness"
		allowed, reason, err := ch.access(ctx, a.verb, v1alpha1.GroupVersion.Group, "windowsreadinesses")
		switch {
		case err != nil:
			ch.undecided(name, err)
		case !allowed:
			ch.add(verdict{Name: name, Result: a.result, Fix: a.fix,
				Message: fmt.Sprintf("you may not %s %s%s", a.verb, windowsReadinesses, because(reason))})
		default:
			ch.pass(name, "you may %s %s", a.verb, windowsReadinesses)
		}
	}
}

// admission compares the admission policies and bindings named winready-*
// with those this build installs (config/admission). One that is missing
// leaves a write the policies bound unguarded; one more is left by another
// release and is not this command's to judge.
func (ch *checker) admission(ctx context.Context, installFix string) {
	want, err := admission.Names()
	if err != nil {
		ch.undecided("AdmissionPolicies", err)
		return
	}
	policies, err := ch.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		ch.undecided("AdmissionPolicies", request("list", "validatingadmissionpolicies.admissionregistration.k8s.io", err))
	} else {
		var have []string
		for _, p := range policies.Items {
			have = append(have, p.Name)
		}
		ch.present("AdmissionPolicies", "ValidatingAdmissionPolicies", want.Policies, have, installFix)
	}
	bindings, err := ch.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		ch.undecided("AdmissionBindings", request("list", "validatingadmissionpolicybindings.admissionregistration.k8s.io", err))
	} else {
		var have []string
		for _, b := range bindings.Items {
			have = append(have, b.Name)
		}
		ch.present("AdmissionBindings", "ValidatingAdmissionPolicyBindings", want.Bindings, have, installFix)
	}
}

func (ch *checker) present(name, kind string, want, have []string, fix string) {
	var missing []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		ch.fail(name, fix, "%d of %d %s missing: %s", len(missing), len(want), kind, boundedNames(missing))
		return
	}
	ch.pass(name, "all %d %s present", len(want), kind)
}

// boundedNames lists at most five names, then how many more.
func boundedNames(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// deploymentAvailable is condition Available, with its message when false.
func deploymentAvailable(dep *appsv1.Deployment) (bool, string) {
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == "True", c.Reason + ": " + c.Message
		}
	}
	return false, "no Available condition yet"
}

func replicas(dep *appsv1.Deployment) int32 {
	if dep.Spec.Replicas == nil {
		return 1
	}
	return *dep.Spec.Replicas
}

func because(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// printVerdicts writes one line a check, as flux check does: ✔ passed,
// ⚠ passed with a warning, ✖ failed and, under it, the fix.
func printVerdicts(w io.Writer, r checkReport) {
	for _, v := range r.Checks {
		mark := "✔"
		switch v.Result {
		case v1alpha1.CheckWarn:
			mark = "⚠"
		case v1alpha1.CheckFail:
			mark = "✖"
		}
		fmt.Fprintf(w, "%s %s: %s\n", mark, v.Name, v.Message)
		if v.Fix != "" && v.Result != v1alpha1.CheckPass {
			fmt.Fprintf(w, "  fix: %s\n", v.Fix)
		}
	}
	if r.Passed {
		fmt.Fprintln(w, "✔ all checks passed")
	}
}
