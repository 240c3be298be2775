package round

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Agent is one agent's side of its kind's rounds: it reads only its own
// plan (and its kind's key) and writes only its own report.
type Agent[P, R any] struct {
	Client    client.WithWatch
	Kind      Kind
	Namespace string
	Node      string
	// Clock says when the agent came up, which decides whether it is in
	// time for its round's window; nil is the system's clock. A simulated
	// agent that comes up late has its own.
	Clock clock.PassiveClock
}

// Now is the time on the agent's clock.
func (a Agent[P, R]) Now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

// Plan waits for the agent's plan of round, or of any round when round is
// empty, and returns it. A kind that plans at the start writes the plans
// before the agents start: its agent reads its plan by name. Another's
// watches its plan by name, so that the API server sends the agent that
// object alone, once it is there.
func (a Agent[P, R]) Plan(ctx context.Context, round ID) (Plan[P], error) {
	name := a.Kind.PlanName(a.Node)
	mine := func(cm *corev1.ConfigMap) bool { return round == "" || cm.Labels[PlanLabel] == string(round) }
	if !a.Kind.PlanOnServe {
		cm := &corev1.ConfigMap{}
		err := a.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, cm)
		switch {
		case err == nil && mine(cm):
			return DecodePlan[P](cm)
		case err != nil && !apierrors.IsNotFound(err):
			return Plan[P]{}, fmt.Errorf("reading the %s plan: %w", a.Kind.Component, err)
		}
	}
	for {
		w, err := a.Client.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(a.Namespace),
			client.MatchingFields{"metadata.name": name})
		if err != nil {
			return Plan[P]{}, fmt.Errorf("watching the %s plan: %w", a.Kind.Component, err)
		}
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Deleted || !mine(cm) {
				continue
			}
			w.Stop()
			return DecodePlan[P](cm)
		}
		w.Stop()
		if ctx.Err() != nil {
			return Plan[P]{}, errors.New("stopped before the plan came")
		}
	}
}

// Secret is the key of the agent's round, from its kind's Secret.
func (a Agent[P, R]) Secret(ctx context.Context, round ID) ([]byte, error) {
	s := &corev1.Secret{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Kind.Name}, s); err != nil {
		return nil, fmt.Errorf("reading the round's key: %w", err)
	}
	if string(s.Data[SecretRoundKey]) != string(round) || len(s.Data[SecretKey]) == 0 {
		return nil, fmt.Errorf("the key in Secret %s is not round %s's", a.Kind.Name, round)
	}
	return s.Data[SecretKey], nil
}

// Report writes the agent's report: its first is created and a later one
// replaces it, each falling back on the other (a restarted agent, a report
// removed by hand), so that an agent makes one write a stage.
func (a Agent[P, R]) Report(ctx context.Context, r Report[R]) error {
	r.Node = a.Node
	cm, err := ReportObject(a.Kind, a.Namespace, r)
	if err != nil {
		return err
	}
	if r.Stage == Serving || !a.Kind.PlanOnServe {
		if err = a.Client.Create(ctx, cm); apierrors.IsAlreadyExists(err) {
			err = a.Client.Update(ctx, cm)
		}
	} else if err = a.Client.Update(ctx, cm); apierrors.IsNotFound(err) {
		err = a.Client.Create(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("writing the %s report: %w", a.Kind.Component, err)
	}
	return nil
}
