package controllers_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// flakiness makes a share of requests fail with a server error, at random
// (from a fixed seed): reads and writes before they reach the API server,
// and writes also after the API server applied them (the response is lost).
type flakiness struct {
	// before and after are the shares of requests that fail.
	before, after float64

	mu  sync.Mutex
	rng *rand.Rand
	// failedBefore and failedAfter count the injected failures.
	failedBefore, failedAfter atomic.Int64
}

func newFlakiness(before, after float64) *flakiness {
	return &flakiness{before: before, after: after, rng: rand.New(rand.NewPCG(1, 2))}
}

var errInjected = apierrors.NewInternalError(errors.New("injected: the connection was reset"))

func (f *flakiness) roll(share float64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() < share
}

// failBefore says whether this request fails before it reaches the API server.
func (f *flakiness) failBefore() bool {
	if f.roll(f.before) {
		f.failedBefore.Add(1)
		return true
	}
	return false
}

// failAfter says whether an applied write's response is lost. The first
// applied write always loses it, so that every run covers that case
// whatever the order of requests.
func (f *flakiness) failAfter() bool {
	if f.failedAfter.Load() == 0 || f.roll(f.after) {
		f.failedAfter.Add(1)
		return true
	}
	return false
}

func (f *flakiness) write(do func() error) error {
	if f.failBefore() {
		return errInjected
	}
	if err := do(); err != nil {
		return err
	}
	if f.failAfter() {
		return errInjected
	}
	return nil
}

// flakyClient is the reconciler's client through a network that drops requests.
type flakyClient struct {
	client.Client
	f *flakiness
}

func (c *flakyClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return (&flakyReader{Reader: c.Client, f: c.f}).Get(ctx, key, obj, opts...)
}

func (c *flakyClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return (&flakyReader{Reader: c.Client, f: c.f}).List(ctx, list, opts...)
}

func (c *flakyClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.f.write(func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c *flakyClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return c.f.write(func() error { return c.Client.Patch(ctx, obj, p, opts...) })
}

func (c *flakyClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.f.write(func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c *flakyClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.f.write(func() error { return c.Client.Delete(ctx, obj, opts...) })
}

// flakyReader is the reconciler's uncached reader through the same network.
type flakyReader struct {
	client.Reader
	f *flakiness
}

func (r *flakyReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if r.f.failBefore() {
		return errInjected
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *flakyReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if r.f.failBefore() {
		return errInjected
	}
	return r.Reader.List(ctx, list, opts...)
}
