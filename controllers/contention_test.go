package controllers_test

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("Another writer of the Installation", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	It("never makes a lost race an error or a refusal: a labeler patching its metadata all along, the migration goes to Ready", func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)

		seen := watchReasons()
		labeled, stop := labeler()
		createWR()
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		stop()
		Expect(labeled()).To(BeNumerically(">", 10), "the labeler wrote all along")
		Expect(seen()).NotTo(ContainElement(BeElementOf(conditions.ReasonRetrying, conditions.ReasonRefused)),
			"a write that lost to the labeler went back to the queue, not into the status")
	})
})

// labeler patches a label of Installation default over and over until it is
// stopped (at the latest when the spec ends), as a GitOps agent's tracking
// label or a labeler would; it returns how many patches it made, and the stop.
func labeler() (func() int, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	wg.Go(func() {
		defer GinkgoRecover()
		inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName}}
		for i := 0; ctx.Err() == nil; i++ {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"example.com/labeled":"%d"}}}`, i)
			if err := k8s.Patch(ctx, inst, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && ctx.Err() == nil {
				Expect(err).NotTo(HaveOccurred())
			}
			mu.Lock()
			n++
			mu.Unlock()
		}
	})
	stop := func() {
		cancel()
		wg.Wait()
	}
	DeferCleanup(stop)
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}, stop
}

// watchReasons records the reason of every Reconciling and Stalled condition
// the WindowsReadiness shows until the spec ends.
func watchReasons() func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &v1alpha1.WindowsReadinessList{})
	Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	var reasons []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			wr, ok := ev.Object.(*v1alpha1.WindowsReadiness)
			if !ok {
				continue
			}
			mu.Lock()
			for _, typ := range []string{conditions.Reconciling, conditions.Stalled} {
				if c := meta.FindStatusCondition(wr.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
					reasons = append(reasons, c.Reason)
				}
			}
			mu.Unlock()
		}
	}()
	DeferCleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), reasons...)
	}
}
