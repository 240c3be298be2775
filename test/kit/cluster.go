package kit

import (
	"context"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/test/calicosim"
)

// Node is a simulated node: a Node object with its InternalIP and the
// kubernetes.io/os label, Ready.
type Node = calicosim.Node

// Cluster is a running control plane with the simulated Calico cluster and
// winready's reconciler.
type Cluster struct {
	env     *Env
	cfg     *rest.Config
	client  client.Client
	timeout time.Duration
	cancel  context.CancelFunc
	done    chan error
	running int
}

// Client reads and writes the cluster straight on the API server, without a
// cache, as an administrator; its scheme knows winready's, Calico's, the
// Tigera operator's and Kubernetes' types.
func (c *Cluster) Client() client.Client { return c.client }

// Config is the administrator's connection to the API server, for clients of
// one's own.
func (c *Cluster) Config() *rest.Config { return c.cfg }
