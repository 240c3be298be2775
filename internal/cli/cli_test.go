package cli

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// refuse returns commands that fail the test if dispatch runs any of them.
func refuse(t *testing.T) commands {
	t.Helper()
	return commands{
		operator: func(operatorOptions) error { t.Error("the operator was started"); return nil },
		probe:    func([]string) error { t.Error("the probe agent was started"); return nil },
		respond:  func([]string) error { t.Error("the responder was started"); return nil },
	}
}

func TestUsageErrorsRunNothing(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want []string // in stderr
	}{
		{[]string{"plna"}, 2, []string{`unknown command "plna"`}},
		{[]string{"help"}, 2, []string{`unknown command "help"`}},
		{[]string{"plna", "--kubeconfig", "k"}, 2, []string{`unknown command "plna"`}},
		{[]string{"--namespace", "x", "extra"}, 2, []string{`unexpected argument "extra"`}},
		{[]string{"--leader-elect=false", "probe"}, 2, []string{`unexpected argument "probe"`}},
		{[]string{"--bogus"}, 2, []string{"flag provided but not defined: -bogus"}},
		{[]string{"--leader-elect=maybe"}, 2, []string{"invalid boolean value"}},
		{[]string{"--help"}, 0, nil},
		{[]string{"-h"}, 0, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			if code := dispatch(tc.args, io.Discard, &stderr, refuse(t)); code != tc.code {
				t.Errorf("exit status %d, want %d", code, tc.code)
			}
			out := stderr.String()
			want := slices.Concat(tc.want, []string{"Usage:", "winready [flags]", "winready probe [flags]",
				"winready respond [flags]", "Operator flags:", "-kubeconfig", "-namespace"})
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("stderr lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestDispatch(t *testing.T) {
	var ran []string
	cmds := commands{
		operator: func(o operatorOptions) error {
			ran = append(ran, "operator", o.namespace, o.kubeconfig)
			return nil
		},
		probe:   func(args []string) error { ran = append(append(ran, "probe"), args...); return nil },
		respond: func(args []string) error { ran = append(append(ran, "respond"), args...); return nil },
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"operator", "winready-system", ""}},
		{[]string{"--namespace", "x", "--kubeconfig=k"}, []string{"operator", "x", "k"}},
		{[]string{"probe", "--node", "a"}, []string{"probe", "--node", "a"}},
		{[]string{"respond", "extra"}, []string{"respond", "extra"}},
	} {
		ran = nil
		var stderr bytes.Buffer
		if code := dispatch(tc.args, io.Discard, &stderr, cmds); code != 0 {
			t.Errorf("%q: exit status %d, want 0; stderr:\n%s", tc.args, code, stderr.String())
		}
		if !slices.Equal(ran, tc.want) {
			t.Errorf("%q ran %q, want %q", tc.args, ran, tc.want)
		}
	}
}

func TestFailingCommandExitsOne(t *testing.T) {
	cmds := refuse(t)
	cmds.probe = func([]string) error { return errors.New("no plan") }
	var stderr bytes.Buffer
	if code := dispatch([]string{"probe"}, io.Discard, &stderr, cmds); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if got, want := stderr.String(), "winready: no plan\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}

func TestVersionPrintsTheBuildAndRunsNothing(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := dispatch([]string{"version"}, &stdout, &stderr, refuse(t)); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	if got := stdout.String(); !strings.HasPrefix(got, "winready dev (revision ") || !strings.HasSuffix(got, ")\n") {
		t.Errorf("stdout %q", got)
	}
	if code := dispatch([]string{"version", "extra"}, &stdout, &stderr, refuse(t)); code != 2 {
		t.Errorf("version with an argument: exit status %d, want 2", code)
	}
}
