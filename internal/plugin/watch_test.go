package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// syncBuffer is written by the watch and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatchPrintsOnlyWhenTheStatusChanges runs status --until Ready through
// a demo migration's last status changes, with a label change between them
// and the first watch request failing: one tree per status, exit 0 at Ready.
func TestWatchPrintsOnlyWhenTheStatusChanges(t *testing.T) {
	seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The first watch request fails as an API server blip would.
	var watches atomic.Int32
	flaky := rest.CopyConfig(cfg)
	flaky.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" && watches.Add(1) == 1 {
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
					Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			}
			return rt.RoundTrip(req)
		})
	})
	var out, errOut syncBuffer
	printed := make(chan struct{}, 16)
	o := &options{flags: genericclioptions.NewConfigFlags(true), now: func() time.Time { return now },
		streams:    genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		restConfig: func() (*rest.Config, error) { return flaky, nil },
		printed:    func() { printed <- struct{}{} }}
	done := make(chan int, 1)
	go func() { done <- execute(ctx, o, "kubectl winready", []string{"status", "--until", "Ready"}) }()

	waitPrint := func(why string) {
		t.Helper()
		select {
		case <-printed:
		case <-ctx.Done():
			t.Fatalf("no print after %s; stdout:\n%s\nstderr:\n%s", why, out.String(), errOut.String())
		}
	}
	waitPrint("the start")
	statusChanges := 0
	update := func(change func(*v1alpha1.WindowsReadiness)) {
		t.Helper()
		wr := getWR(t)
		change(wr)
		if err := k8s.Status().Update(ctx, wr); err != nil {
			t.Fatal(err)
		}
		statusChanges++
		waitPrint("status change " + wr.Status.Message)
	}
	update(func(wr *v1alpha1.WindowsReadiness) {
		wr.Status.Rollout.Updated = 4
		wr.Status.Message = "step 3/6 (BGP): waiting for DaemonSet calico-system/calico-node rollout (4 of 5 updated)"
	})
	// Not the spec, not the status: no print.
	wr := getWR(t)
	if err := k8s.Patch(ctx, wr, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"platform"}}}`))); err != nil {
		t.Fatal(err)
	}
	if wr.Generation != getWR(t).Generation {
		t.Fatal("a label changed the generation")
	}
	update(func(wr *v1alpha1.WindowsReadiness) {
		wr.Status.Rollout.Updated = 5
		wr.Status.Message = "step 6/6 (WindowsDataplane): waiting for the rollout"
	})
	update(func(wr *v1alpha1.WindowsReadiness) {
		wr.Status.Phase = v1alpha1.PhaseReady
		wr.Status.Message = "ready for Windows nodes"
		for i := range wr.Status.Conditions {
			wr.Status.Conditions[i].ObservedGeneration = wr.Generation
		}
		wr.Status.Conditions[0] = metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: "Migrated",
			Message: "ready", ObservedGeneration: wr.Generation, LastTransitionTime: *at(0)}
	})

	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit status %d, want 0; stderr:\n%s", code, errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("status --until Ready did not end at Ready")
	}
	if trees := strings.Count(out.String(), "WindowsReadiness/default  direction"); trees != statusChanges+1 {
		t.Errorf("%d trees for %d status changes and the start:\n%s", trees, statusChanges, out.String())
	}
	if len(printed) != 0 {
		t.Errorf("%d prints more than status changes", len(printed))
	}
	if watches.Load() < 2 || !strings.Contains(errOut.String(), "watch: ") {
		t.Errorf("the failed watch was not retried (%d watch requests); stderr:\n%s", watches.Load(), errOut.String())
	}
}

func TestUntilRefusesAnUnknownState(t *testing.T) {
	code, _, stderr := runCode(t, "status", "--until", "Done")
	if code != ExitError || !strings.Contains(stderr, "one of Ready, Stalled, RolledBack") {
		t.Errorf("exit status %d; stderr:\n%s", code, stderr)
	}
}

// watchRun runs kubectl winready with args in the background, against c,
// calling printed after each print.
func watchRun(ctx context.Context, c *rest.Config, args ...string) (out, errOut *syncBuffer, printed chan struct{}, done chan int) {
	out, errOut = &syncBuffer{}, &syncBuffer{}
	printed = make(chan struct{}, 16)
	o := &options{flags: genericclioptions.NewConfigFlags(true), now: func() time.Time { return now },
		streams:    genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut},
		restConfig: func() (*rest.Config, error) { return c, nil },
		printed:    func() { printed <- struct{}{} }}
	done = make(chan int, 1)
	go func() { done <- execute(ctx, o, "kubectl winready", args) }()
	return out, errOut, printed, done
}

// becomeReady writes the status of a finished migration.
func becomeReady(t *testing.T, ctx context.Context) {
	t.Helper()
	wr := getWR(t)
	wr.Status.Phase = v1alpha1.PhaseReady
	wr.Status.Message = "ready for Windows nodes"
	for i := range wr.Status.Conditions {
		wr.Status.Conditions[i].ObservedGeneration = wr.Generation
	}
	wr.Status.Conditions[0] = metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: "Migrated",
		Message: "ready", ObservedGeneration: wr.Generation, LastTransitionTime: *at(0)}
	if err := k8s.Status().Update(ctx, wr); err != nil {
		t.Fatal(err)
	}
}

// TestWatchStreamsParse runs status --watch --until Ready --timeout 5m with
// -o yaml and -o json while the test makes the migration Ready, and decodes
// the output object by object.
func TestWatchStreamsParse(t *testing.T) {
	for _, format := range []string{"yaml", "json"} {
		t.Run(format, func(t *testing.T) {
			seed(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, errOut, printed, done := watchRun(ctx, cfg, "status", "--watch", "-o", format, "--until", "Ready", "--timeout", "5m")
			select {
			case <-printed:
			case <-ctx.Done():
				t.Fatalf("nothing printed; stderr:\n%s", errOut.String())
			}
			becomeReady(t, ctx)
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut.String())
				}
			case <-ctx.Done():
				t.Fatal("the watch did not end at Ready")
			}

			var phases []v1alpha1.Phase
			if format == "yaml" {
				if !strings.Contains(out.String(), "\n---\n") {
					t.Errorf("no --- between the documents:\n%s", out.String())
				}
				docs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out.String())))
				for {
					doc, err := docs.Read()
					if errors.Is(err, io.EOF) {
						break
					} else if err != nil {
						t.Fatal(err)
					}
					wr := &v1alpha1.WindowsReadiness{}
					if err := yaml.UnmarshalStrict(doc, wr); err != nil {
						t.Fatalf("document %d: %v:\n%s", len(phases)+1, err, doc)
					}
					phases = append(phases, wr.Status.Phase)
				}
			} else {
				for i, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
					wr := &v1alpha1.WindowsReadiness{}
					if err := json.Unmarshal([]byte(line), wr); err != nil {
						t.Fatalf("line %d: %v:\n%s", i+1, err, line)
					}
					phases = append(phases, wr.Status.Phase)
				}
			}
			if want := []v1alpha1.Phase{v1alpha1.PhaseMigrating, v1alpha1.PhaseReady}; !slices.Equal(phases, want) {
				t.Errorf("phases %v, want %v; output:\n%s", phases, want, out.String())
			}
		})
	}
}

// TestWatchEndsOnPermanentErrors: after the first print (a get of the
// object), a 403 or the CRD gone (a 404 of the list or the watch under the
// informer) ends the watch with its status; riding them out would wait for
// ever.
func TestWatchEndsOnPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		reason metav1.StatusReason
		code   int
	}{
		{"forbidden", http.StatusForbidden, metav1.StatusReasonForbidden, ExitForbidden},
		{"the CRD deleted", http.StatusNotFound, metav1.StatusReasonNotFound, ExitNotInstalled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			broken := rest.CopyConfig(cfg)
			broken.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return roundTripper(func(req *http.Request) (*http.Response, error) {
					if strings.HasSuffix(req.URL.Path, "/windowsreadinesses") {
						body, _ := json.Marshal(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
							Status: metav1.StatusFailure, Code: int32(tc.status), Reason: tc.reason,
							Message: "refused by the test", Details: &metav1.StatusDetails{Group: v1alpha1.GroupVersion.Group, Kind: "windowsreadinesses"}})
						return &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {"application/json"}},
							Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
					}
					return rt.RoundTrip(req)
				})
			})
			_, errOut, printed, done := watchRun(ctx, broken, "status", "--watch")
			select {
			case <-printed:
			case <-ctx.Done():
				t.Fatalf("nothing printed; stderr:\n%s", errOut.String())
			}
			select {
			case code := <-done:
				if code != tc.code {
					t.Errorf("exit status %d, want %d; stderr:\n%s", code, tc.code, errOut.String())
				}
			case <-ctx.Done():
				t.Fatalf("the watch rode out a permanent error; stderr:\n%s", errOut.String())
			}
		})
	}
}
