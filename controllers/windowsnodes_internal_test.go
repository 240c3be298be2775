package controllers

import (
	"context"
	"errors"
	"testing"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/winready/winready/api/v1alpha1"
)

// servesBlocks is discovery in a cluster whose projectcalico.org/v3 serves
// IPAM blocks (the v3 CRDs).
type servesBlocks struct{}

func (servesBlocks) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != calicov3.SchemeGroupVersion.String() {
		return &metav1.APIResourceList{}, nil
	}
	return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "ipamblocks"}}}, nil
}

func block(name, cidr, host string) *calicov3.IPAMBlock {
	return &calicov3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: calicov3.IPAMBlockSpec{CIDR: cidr, Affinity: ptr.To("host:" + host)}}
}

// TestTheJoinWatchLooksUpTheBlocksOfTheNodesItWaitsForInTheCache: a pass
// reads, through the cache's index by node, the blocks of the nodes still
// waiting for one, and lists nothing from the API server; a node that had a
// block keeps it without a look.
func TestTheJoinWatchLooksUpTheBlocksOfTheNodesItWaitsForInTheCache(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{block("b1", "172.20.0.64/26", "win-1"), block("b2", "172.20.0.0/26", "win-1"), block("b3", "172.20.1.0/26", "linux-0")}
	var looked []string
	cached := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&calicov3.IPAMBlock{}, blockHostIndex, blockHost).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if o.FieldSelector == nil {
				return errors.New("an IPAM block list without the index")
			}
			looked = append(looked, o.FieldSelector.String())
			return c.List(ctx, list, opts...)
		},
	})
	apiServer := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("listed from the API server")
		},
	})
	p := joinWatch{&Reconciler{Client: cached, APIReader: apiServer, Discovery: servesBlocks{}}}
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "win-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "win-2"}}}
	prev := map[string]*v1alpha1.WindowsNodeJoin{"win-2": {Name: "win-2", Block: "172.20.2.0/26"}}
	blocks, readable, err := p.affineBlocks(context.Background(), nodes, prev)
	if err != nil || !readable {
		t.Fatalf("readable %v, %v", readable, err)
	}
	if blocks["win-1"] != "172.20.0.0/26" || blocks["win-2"] != "172.20.2.0/26" || len(blocks) != 2 {
		t.Errorf("blocks %v", blocks)
	}
	if len(looked) != 1 || looked[0] != blockHostIndex+"=win-1" {
		t.Errorf("looked up %v, want win-1's blocks alone", looked)
	}
}
