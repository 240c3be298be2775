package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// change is one change a command makes: of the spec, or of a request
// annotation.
type change struct {
	// spec is what the merge patch sets under spec; nil when the object
	// holds it already, and unchanged says so.
	spec func(wr *v1alpha1.WindowsReadiness) (spec map[string]any, unchanged string, err error)
	// annotation, set instead of spec, is the annotation the change sets to
	// a new value (freshValue): a request to the manager, which any new
	// value makes again.
	annotation string
	what       string
	next       string
	guardByRV  bool // a list is replaced whole: guard it with the resourceVersion
	// confirm, when set, is asked before the change is made or printed.
	confirm func(wr *v1alpha1.WindowsReadiness) error
}

// apply makes ch, or, when a GitOps tool owns the object and force is
// false, prints the spec to commit and changes nothing.
// getBoth reads the WindowsReadiness as it is stored (what a GitOps tool
// compares) and as winready's type.
func getBoth(ctx context.Context, c client.Client) (*unstructured.Unstructured, *v1alpha1.WindowsReadiness, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("WindowsReadiness"))
	if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, errNoWindowsReadiness
		}
		return nil, nil, fmt.Errorf("reading WindowsReadiness %s: %w", v1alpha1.Name, request("get", windowsReadinesses, err))
	}
	wr := &v1alpha1.WindowsReadiness{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, wr); err != nil {
		return nil, nil, fmt.Errorf("reading WindowsReadiness %s: %w", v1alpha1.Name, err)
	}
	return u, wr, nil
}

func (o *options) apply(ctx context.Context, force bool, output string, ch change) error {
	if output != "yaml" && output != "patch" {
		return withCode(ExitError, fmt.Errorf("unknown output format %q: use yaml or patch", output))
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	u, wr, err := getBoth(ctx, c)
	if err != nil {
		return err
	}
	owner := gitOpsOwner(u)
	var patch map[string]any
	what, undo := ch.what, "put the old spec back"
	if ch.annotation != "" {
		value := freshValue(o.now(), wr.Annotations[ch.annotation])
		patch = map[string]any{"metadata": map[string]any{"annotations": map[string]any{ch.annotation: value}}}
		what = "annotation " + ch.annotation + "=" + value
		// Flux's kustomize-controller takes over the fields of the field
		// managers named kubectl* and drops those Git lacks; Argo CD puts
		// back a value Git holds. Either change is one more request.
		undo = "put back the annotation as Git holds it (Flux drops one Git lacks)"
	} else {
		spec, unchanged, err := ch.spec(wr)
		if err != nil {
			return err
		}
		if spec == nil {
			_, err := fmt.Fprintf(o.streams.Out, "windowsreadiness/%s unchanged: %s\n", v1alpha1.Name, unchanged)
			return err
		}
		patch = map[string]any{"spec": spec}
	}
	if ch.confirm != nil {
		if err := ch.confirm(wr); err != nil {
			return err
		}
	}
	if owner != "" && !force {
		return o.printToCommit(u, patch, owner, undo, output)
	}
	if ch.guardByRV {
		patch["metadata"] = map[string]any{"resourceVersion": wr.ResourceVersion}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := request("patch", windowsReadinesses, c.Patch(ctx, wr, client.RawPatch(types.MergePatchType, data), client.FieldOwner(FieldManager))); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("patching WindowsReadiness %s: someone else changed it meanwhile, run the command again: %w", v1alpha1.Name, err)
		}
		return fmt.Errorf("patching WindowsReadiness %s: %w", v1alpha1.Name, err)
	}
	_, err = fmt.Fprintf(o.streams.Out, "windowsreadiness/%s patched: %s\nnext: %s\n", v1alpha1.Name, what, ch.next)
	return err
}

// freshValue is the value of a request annotation that asks again: the time,
// to the nanosecond. A value equal to the one the object holds (a stopped
// clock) gets a counter, so that it is new all the same.
func freshValue(now time.Time, current string) string {
	v := now.UTC().Format(time.RFC3339Nano)
	if current == v {
		return v + "-1"
	}
	if n, ok := strings.CutPrefix(current, v+"-"); ok {
		if n, err := strconv.Atoi(n); err == nil {
			return v + "-" + strconv.Itoa(n+1)
		}
	}
	return v
}

// printToCommit writes to stdout the object as it is in Git with patch
// made (or, with -o patch, the JSON merge patch alone), and says why
// nothing changed: owner would undo it at its next sync (undo says how).
func (o *options) printToCommit(u *unstructured.Unstructured, patch map[string]any, owner, undo, output string) error {
	var data []byte
	var err error
	if output == "patch" {
		data, err = json.Marshal(patch)
		data = append(data, '\n')
	} else {
		inGit, from := asInGit(u)
		if from != "" {
			fmt.Fprintf(o.streams.ErrOut, "The object as in Git: %s.\n", from)
		}
		mergeInto(inGit, patch)
		data, err = yaml.Marshal(inGit)
	}
	if err != nil {
		return err
	}
	if _, err := o.streams.Out.Write(data); err != nil {
		return err
	}
	what := "the object printed above to Git"
	if output == "patch" {
		what = "the change printed above (a JSON merge patch) to the file in Git"
	}
	return withCode(ExitManagedByGitOps, fmt.Errorf(
		"nothing changed: windowsreadiness/%s is managed by %s, which would %s at its next sync.\n"+
			"Commit %s, or run again with --force to patch it as field manager %s "+
			"(docs/gitops.md says when to)",
		u.GetName(), owner, undo, what, FieldManager))
}

// mergeInto makes patch in obj as a JSON merge patch does: maps merged key
// by key, anything else replaced.
func mergeInto(obj, patch map[string]any) {
	for k, v := range patch {
		sub, ok := v.(map[string]any)
		if !ok {
			obj[k] = v
			continue
		}
		var into map[string]any
		switch cur := obj[k].(type) {
		case map[string]any:
			into = cur
		case map[string]string:
			into = map[string]any{}
			for ck, cv := range cur {
				into[ck] = cv
			}
		default:
			into = map[string]any{}
		}
		mergeInto(into, sub)
		obj[k] = into
	}
}

// lastApplied is the annotation of client-side apply (kubectl apply, Argo
// CD's default sync): the object as the tool applied it.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// asInGit is the object as the GitOps tool applied it, so as it is in Git
// (with the labels and annotations the tool adds itself, which are in the
// object it applies), and where that was read from. In order:
//   - the last-applied-configuration annotation of a client-side apply;
//   - the fields a GitOps tool's server-side apply owns (managedFields):
//     the API server's defaults and everything others wrote are left out;
//   - failing both, the live object without what the API server keeps
//     (resourceVersion, uid, managedFields, status, ...); the defaults it
//     wrote into spec cannot be told apart then, and are kept.
func asInGit(u *unstructured.Unstructured) (map[string]any, string) {
	if data, ok := u.GetAnnotations()[lastApplied]; ok {
		obj := map[string]any{}
		if err := json.Unmarshal([]byte(data), &obj); err == nil {
			return obj, "annotation " + lastApplied
		}
	}
	var applied *fieldpath.Set
	var by []string
	for _, m := range u.GetManagedFields() {
		if _, ok := gitOpsManagers[m.Manager]; !ok || m.Operation != metav1.ManagedFieldsOperationApply ||
			m.Subresource != "" || m.APIVersion != u.GetAPIVersion() || m.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(m.FieldsV1.GetRawBytes())); err != nil {
			continue
		}
		if applied == nil {
			applied = set
		} else {
			applied = applied.Union(set)
		}
		by = append(by, m.Manager)
	}
	if applied != nil {
		obj, _ := owned(u.Object, applied)
		inGit := obj.(map[string]any)
		// managedFields do not record what identifies the object.
		inGit["apiVersion"], inGit["kind"] = u.GetAPIVersion(), u.GetKind()
		meta, _ := inGit["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["name"] = u.GetName()
		inGit["metadata"] = meta
		return inGit, "the fields " + strings.Join(slices.Compact(by), ", ") + " applied (managedFields)"
	}
	live := u.DeepCopy()
	meta := map[string]any{"name": live.GetName()}
	if l := live.GetLabels(); len(l) > 0 {
		meta["labels"] = l
	}
	a := live.GetAnnotations()
	delete(a, lastApplied)
	if len(a) > 0 {
		meta["annotations"] = a
	}
	obj := map[string]any{"apiVersion": live.GetAPIVersion(), "kind": live.GetKind(), "metadata": meta}
	if spec, ok := live.Object["spec"]; ok {
		obj["spec"] = spec
	}
	return obj, "the live object (no record of what was applied): check the defaults in spec against Git"
}

// owned is the part of v that set holds (paths relative to v), and whether
// there is any.
func owned(v any, set *fieldpath.Set) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range v {
			pe := fieldpath.PathElement{FieldName: &k}
			if sub, ok := set.Children.Get(pe); ok {
				if kept, ok := owned(val, sub); ok {
					out[k] = kept
					continue
				}
			}
			if set.Members.Has(pe) {
				out[k] = val
			}
		}
		return out, len(out) > 0
	case []any:
		var out []any
		for i, item := range v {
			for pe := range set.Children.All() {
				if sameItem(pe, i, item) {
					if sub, _ := set.Children.Get(pe); sub != nil {
						if kept, ok := owned(item, sub); ok {
							out = append(out, kept)
						}
					}
				}
			}
			for pe := range set.Members.All() {
				if sameItem(pe, i, item) {
					out = append(out, item)
				}
			}
		}
		return out, len(out) > 0
	}
	return v, true
}

// sameItem is whether pe names item, the i-th of its list.
func sameItem(pe fieldpath.PathElement, i int, item any) bool {
	switch {
	case pe.Index != nil:
		return *pe.Index == i
	case pe.Value != nil:
		return value.Equals(*pe.Value, value.NewValueInterface(item))
	case pe.Key != nil:
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		for _, f := range *pe.Key {
			if !value.Equals(f.Value, value.NewValueInterface(m[f.Name])) {
				return false
			}
		}
		return true
	}
	return false
}

func gitOpsFlags(cmd *cobra.Command, force *bool, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "yaml",
		"what to print when Argo CD or Flux manages the WindowsReadiness: yaml, the object as in Git with the change, or patch, the JSON merge patch alone")
	cmd.Flags().BoolVar(force, "force", false,
		"patch even when Argo CD or Flux manages the WindowsReadiness (which puts its own spec back at the next sync); without it, print the spec to commit")
}

func approveCommand(o *options) *cobra.Command {
	var force bool
	var output string
	cmd := &cobra.Command{
		Use:   "approve STEP",
		Short: "Approve a disruptive step that waits for approval (adds it to spec.approvedSteps): " + joinSteps(v1alpha1.ApprovableSteps),
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			step, err := approvable(args[0])
			if err != nil {
				return err
			}
			return o.apply(cmd.Context(), force, output, change{
				spec: func(wr *v1alpha1.WindowsReadiness) (map[string]any, string, error) {
					if slices.Contains(wr.Spec.ApprovedSteps, step) {
						return nil, string(step) + " is approved already", nil
					}
					// The whole list, guarded: a merge patch replaces lists,
					// so an approval made meanwhile must not be lost.
					return map[string]any{"approvedSteps": append(slices.Clone(wr.Spec.ApprovedSteps), step)}, "", nil
				},
				guardByRV: true,
				what:      "spec.approvedSteps +" + string(step),
				next:      "kubectl winready status --watch (step " + string(step) + " starts)",
			})
		},
	}
	gitOpsFlags(cmd, &force, &output)
	return cmd
}

// approvable is the approvable step name, whatever its case, or an error
// naming the approvable steps.
func approvable(arg string) (v1alpha1.StepName, error) {
	for _, s := range v1alpha1.ApprovableSteps {
		if strings.EqualFold(arg, string(s)) {
			return s, nil
		}
	}
	steps := joinSteps(v1alpha1.ApprovableSteps)
	for _, s := range v1alpha1.StepNames {
		if strings.EqualFold(arg, string(s)) {
			return "", withCode(ExitError, fmt.Errorf("step %s never waits for approval: only %s do", s, steps))
		}
	}
	// At most two edits away, as cobra suggests commands: with three, any
	// three-letter word is "BGP".
	best, dist := v1alpha1.StepName(""), 3
	for _, s := range v1alpha1.ApprovableSteps {
		if d := distance(strings.ToLower(arg), strings.ToLower(string(s))); d < dist {
			best, dist = s, d
		}
	}
	if best != "" {
		return "", withCode(ExitError, fmt.Errorf("unknown step %q: did you mean %s? The approvable steps are %s", arg, best, steps))
	}
	return "", withCode(ExitError, fmt.Errorf("unknown step %q: the approvable steps are %s", arg, steps))
}

func joinSteps(steps []v1alpha1.StepName) string {
	s := make([]string, len(steps))
	for i, st := range steps {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func pauseCommand(o *options, pause bool) *cobra.Command {
	use, short, what, next := "pause", "Pause before the next change (spec.paused: true)", "spec.paused true",
		"kubectl winready status (the step under way finishes its wait; no new change starts)"
	already := "paused already"
	if !pause {
		use, short, what, next = "resume", "Resume a paused migration or rollback (spec.paused: false)", "spec.paused false",
			"kubectl winready status --watch"
		already = "not paused"
	}
	var force bool
	var output string
	cmd := &cobra.Command{
		Use: use, Short: short, Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.apply(cmd.Context(), force, output, change{
				spec: func(wr *v1alpha1.WindowsReadiness) (map[string]any, string, error) {
					if wr.Spec.Paused == pause {
						return nil, already, nil
					}
					return map[string]any{"paused": pause}, "", nil
				},
				what: what, next: next,
			})
		},
	}
	gitOpsFlags(cmd, &force, &output)
	return cmd
}

func rollbackCommand(o *options) *cobra.Command {
	var force, yes bool
	var output string
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Roll the migration back to the recorded originals (spec.direction: Rollback); refused while Windows nodes exist",
		Long: "Shows the steps a rollback reverts, in the order it reverts them, and sets spec.direction: Rollback once " +
			"confirmed with --yes. Refused while condition RollbackAllowed is False (Windows nodes exist).",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.apply(cmd.Context(), force, output, change{
				spec: func(wr *v1alpha1.WindowsReadiness) (map[string]any, string, error) {
					if wr.Spec.Direction == v1alpha1.DirectionRollback {
						return nil, "spec.direction is Rollback already", nil
					}
					if c := meta.FindStatusCondition(wr.Status.Conditions, conditions.RollbackAllowed); c != nil && c.Status == "False" {
						return nil, "", withCode(ExitRefused, fmt.Errorf("rollback refused: %s (%s): %s",
							conditions.RollbackAllowed, c.Reason, c.Message))
					}
					return map[string]any{"direction": v1alpha1.DirectionRollback}, "", nil
				},
				confirm: func(wr *v1alpha1.WindowsReadiness) error {
					o.printReversePlan(wr)
					if !yes {
						return withCode(ExitRefused, errors.New("nothing changed: run again with --yes to roll back"))
					}
					return nil
				},
				what: "spec.direction Rollback",
				next: "kubectl winready status --watch (phase RollingBack, then RolledBack)",
			})
		},
	}
	gitOpsFlags(cmd, &force, &output)
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "roll back without asking")
	return cmd
}

// printReversePlan writes the steps a rollback reverts, last changed first.
func (o *options) printReversePlan(wr *v1alpha1.WindowsReadiness) {
	var steps []v1alpha1.StepStatus
	for _, s := range wr.Status.Steps {
		if s.Changed {
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		fmt.Fprintln(o.streams.ErrOut, "A rollback reverts nothing: no step has changed the cluster.")
		return
	}
	fmt.Fprintf(o.streams.ErrOut, "A rollback reverts, in this order, to the values recorded in status.originals:\n")
	for i, s := range slices.Backward(steps) {
		fmt.Fprintf(o.streams.ErrOut, "  %d. %s (%s)\n", len(steps)-i, s.Name, s.State)
	}
}
