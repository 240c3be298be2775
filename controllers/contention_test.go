package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/contention"
)

var _ = Describe("Another writer of the Installation", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	It("never makes a lost race an error or a refusal: a labeler patching its metadata all along, the migration goes to Ready", func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		reasons, err := contention.WatchReasons(wc)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(reasons.Stop)
		// A label every 25 ms, within any pass: a status write of winready's,
		// a status or spec write of the simulated operator's and a label all
		// land between one pass's read and its write. A label races
		// winready's reads and the simulated operator's writes, not
		// winready's patches of the Installation, which test
		// metadata.generation; as fast as the API server answered, the
		// labeler made a tenth of the suite's writes.
		labeler := contention.StartLabeler(k8s, 25*time.Millisecond)
		DeferCleanup(labeler.Stop)
		on.CreateWR()
		// The labeler writes the whole migration long: on a loaded machine
		// the migration takes longer than the suite's bound for a wait, so it
		// gets the bound of a whole migration and its pod network checks
		// under that load.
		Eventually(on.Phase).WithTimeout(3 * time.Minute).Should(Equal(v1alpha1.PhaseReady))
		patches, err := labeler.Stop()
		Expect(err).NotTo(HaveOccurred())
		Expect(patches).To(BeNumerically(">", 10), "the labeler wrote all along")
		Expect(reasons.Stop()).NotTo(ContainElement(BeElementOf(conditions.ReasonRetryingAfterError, conditions.ReasonRefusedByAPIServer)),
			"a write that lost to the labeler went back to the queue, not into the status")
	})
})
