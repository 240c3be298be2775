package plugin

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/winready/winready/api/v1alpha1"
)

// annotationFlags are gitOpsFlags for a command that sets a request
// annotation.
func annotationFlags(cmd *cobra.Command, force *bool, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "yaml",
		"what to print when Argo CD or Flux manages the WindowsReadiness: yaml, the object as in Git with the new value, or patch, the JSON merge patch alone")
	cmd.Flags().BoolVar(force, "force", false,
		"patch even when Argo CD or Flux manages the WindowsReadiness (Flux drops the annotation at its next sync, Argo CD puts back a value Git holds: each a request again); without it, print the object to commit")
}

func retryCommand(o *options) *cobra.Command {
	var force bool
	var output string
	cmd := &cobra.Command{
		Use:   "retry",
		Short: "Make winready look again at once, after fixing what a Stalled condition names (a new value of annotation " + v1alpha1.RetryAnnotation + ")",
		Long: "Sets annotation " + v1alpha1.RetryAnnotation + " of the WindowsReadiness to the time, in one merge patch: any new " +
			"value wakes the manager, which then looks at the cluster again instead of waiting for the spec or a watched " +
			"object to change.",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.apply(cmd.Context(), force, output, change{
				annotation: v1alpha1.RetryAnnotation,
				next:       "kubectl winready status --watch (winready looks again at once)",
			})
		},
	}
	annotationFlags(cmd, &force, &output)
	return cmd
}

// rerunTarget is what kubectl winready rerun runs again.
type rerunTarget struct {
	name, annotation, short, next string
}

var rerunTargets = []rerunTarget{
	{"preflight", v1alpha1.RerunPreflightAnnotation, "the preflight and its UDP 4789 probe",
		"kubectl winready status --watch (the preflight runs again: condition PreflightPassed)"},
	{"podcheck", v1alpha1.RerunPodCheckAnnotation, "the pod network check, after a failed round",
		"kubectl winready status --watch (the failed pod network check runs again)"},
}

func rerunCommand(o *options) *cobra.Command {
	var force bool
	var output string
	var names, lines []string
	for _, t := range rerunTargets {
		names = append(names, t.name)
		lines = append(lines, fmt.Sprintf("  %-10s %s (annotation %s)", t.name, t.short, t.annotation))
	}
	cmd := &cobra.Command{
		Use:   "rerun " + strings.Join(names, "|"),
		Short: "Run the preflight, or a failed pod network check, again (a new value of its rerun annotation)",
		Long: "Sets the rerun annotation of the WindowsReadiness to the time, in one merge patch: any new value asks " +
			"the manager for a new round.\n" + strings.Join(lines, "\n"),
		ValidArgs: names,
		Args:      usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := rerunTargetOf(args[0])
			if err != nil {
				return err
			}
			return o.apply(cmd.Context(), force, output, change{annotation: t.annotation, next: t.next})
		},
	}
	annotationFlags(cmd, &force, &output)
	return cmd
}

// rerunTargetOf is the target arg names, whatever its case, or a usage
// error naming the nearest target.
func rerunTargetOf(arg string) (rerunTarget, error) {
	var names []string
	best, dist := "", 3
	for _, t := range rerunTargets {
		if strings.EqualFold(arg, t.name) {
			return t, nil
		}
		names = append(names, t.name)
		if d := distance(strings.ToLower(arg), t.name); d < dist {
			best, dist = t.name, d
		}
	}
	if best != "" {
		return rerunTarget{}, withCode(ExitError, fmt.Errorf("unknown rerun target %q: did you mean %s? The targets are %s",
			arg, best, strings.Join(names, ", ")))
	}
	return rerunTarget{}, withCode(ExitError, fmt.Errorf("unknown rerun target %q: the targets are %s", arg, strings.Join(names, ", ")))
}
