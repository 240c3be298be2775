// Package v1alpha1_test holds the WindowsReadiness CRD to its schema, its
// CEL rules and its printer columns on a bare control plane: the CRD of
// config/crd, no Calico, no simulator, no manager.
package v1alpha1_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/test/kit"
	"github.com/winready/winready/test/kit/look"
)

var (
	ctx     = context.Background()
	testEnv *kit.Env
	cfg     *rest.Config
	k8s     client.Client
	// on reads and writes the WindowsReadiness with k8s (test/kit/look).
	on look.Cluster
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "The WindowsReadiness API")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// A deleted WindowsReadiness, which no finalizer holds here, is gone at
	// once; the bound is for a busy machine.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	var err error
	testEnv, err = kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs})
	Expect(err).NotTo(HaveOccurred())
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	on = look.On(ctx, k8s)
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

func mustParse(s string) time.Duration {
	d, err := time.ParseDuration(s)
	Expect(err).NotTo(HaveOccurred())
	return d
}
