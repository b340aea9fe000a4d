package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// breakerStateKey is the ConfigMap data key holding the JSON state.
const breakerStateKey = "state"

// breakerState is what the ConfigMap holds. Times are when a node was
// admitted; entries older than the window no longer count.
type breakerState struct {
	Window    map[string]time.Time `json:"window"`
	Tripped   bool                 `json:"tripped"`
	TrippedAt *time.Time           `json:"tripped_at,omitempty"`
	// TrippedBy is the node whose admission would have exceeded the budget.
	TrippedBy string `json:"tripped_by,omitempty"`
	// Reason is why a trip not of the budget's own happened (Trip: the
	// quarantined-share cap refused a fault).
	Reason string `json:"reason,omitempty"`
}

// Breaker is the actuator.Breaker kept in a ConfigMap. Every change is a
// read-modify-write whose Update carries the resourceVersion read, so two
// replicas (or a restarted one) admitting at once cannot both spend the
// last slot: one of them gets Conflict, re-reads and sees it spent.
type Breaker struct {
	client kubernetes.Interface
	cfg    BreakerConfig
	gpu    gpuNodes // the nodes the budget's share is taken of
}

var _ actuator.Breaker = (*Breaker)(nil)

// newBreaker returns a Breaker whose budget is a share of gpu's GPU nodes.
func newBreaker(client kubernetes.Interface, cfg BreakerConfig, gpu gpuNodes) *Breaker {
	return &Breaker{client: client, cfg: cfg, gpu: gpu}
}

// Admit implements actuator.Breaker. A node already in the window is
// admitted even when the breaker is tripped: it was counted, and a retried
// quarantine of it must not be refused.
func (b *Breaker) Admit(ctx context.Context, node string, now time.Time) (bool, error) {
	var admitted bool
	err := b.update(ctx, func(st *breakerState) (bool, error) {
		pruned := st.prune(now.Add(-b.cfg.Window))
		if _, ok := st.Window[node]; ok {
			admitted = true
			return pruned, nil
		}
		if st.Tripped {
			admitted = false
			return pruned, nil
		}
		budget, err := b.budget(ctx)
		if err != nil {
			return false, err
		}
		if len(st.Window)+1 > budget {
			admitted = false
			st.Tripped, st.TrippedAt, st.TrippedBy = true, &now, node
			return true, nil
		}
		admitted = true
		st.Window[node] = now
		return true, nil
	})
	return admitted, err
}

// Refund implements actuator.Breaker: the node's entry goes only if it is
// this admission's (same time); an earlier one of the window stays.
func (b *Breaker) Refund(ctx context.Context, node string, admittedAt time.Time) error {
	return b.update(ctx, func(st *breakerState) (bool, error) {
		if at, ok := st.Window[node]; !ok || !at.Equal(admittedAt) {
			return false, nil
		}
		delete(st.Window, node)
		return true, nil
	})
}

// Trip implements actuator.Breaker: the flag, the time and the reason
// written with the resourceVersion read, as Admit writes its trip; the
// window stays as it is.
func (b *Breaker) Trip(ctx context.Context, now time.Time, detail string) (bool, error) {
	var tripped bool
	err := b.update(ctx, func(st *breakerState) (bool, error) {
		if st.Tripped {
			tripped = false
			return false, nil
		}
		tripped = true
		st.Tripped, st.TrippedAt, st.TrippedBy, st.Reason = true, &now, "", detail
		return true, nil
	})
	return tripped, err
}

// Tripped implements actuator.Breaker.
func (b *Breaker) Tripped(ctx context.Context) (bool, error) {
	_, st, err := b.read(ctx)
	if err != nil {
		return false, err
	}
	return st.Tripped, nil
}

// Reset implements actuator.Breaker.
func (b *Breaker) Reset(ctx context.Context) error {
	return b.update(ctx, func(st *breakerState) (bool, error) {
		*st = breakerState{Window: map[string]time.Time{}}
		return true, nil
	})
}

// State implements actuator.Breaker: the nodes admitted within the window
// before now, of the budget the GPU nodes allow.
func (b *Breaker) State(ctx context.Context, now time.Time) (actuator.BreakerState, error) {
	_, st, err := b.read(ctx)
	if err != nil {
		return actuator.BreakerState{}, err
	}
	st.prune(now.Add(-b.cfg.Window)) // a copy: nothing is written
	out := actuator.BreakerState{Tripped: st.Tripped, Used: len(st.Window), Window: b.cfg.Window}
	if st.Tripped {
		if st.TrippedAt != nil {
			out.TrippedAt = *st.TrippedAt
		}
		switch {
		case st.Reason != "":
			out.Detail = st.Reason
		case st.TrippedBy != "":
			out.Detail = "admitting " + st.TrippedBy + " would have exceeded the budget"
		}
	}
	if out.Budget, err = b.budget(ctx); err != nil {
		return actuator.BreakerState{}, err
	}
	return out, nil
}

// budget is max_share of the GPU nodes, at least one.
func (b *Breaker) budget(ctx context.Context) (int, error) {
	gpuNodes, _, err := b.gpu.count(ctx, b.client)
	if err != nil {
		return 0, err
	}
	return breakerBudget(b.cfg.MaxShare, gpuNodes), nil
}

// breakerBudget is floor(maxShare × gpuNodes), at least 1. The epsilon
// keeps 0.29 × 100 from flooring to 28.
func breakerBudget(maxShare float64, gpuNodes int) int {
	return max(1, int(math.Floor(maxShare*float64(gpuNodes)+1e-9)))
}

// update runs change on the current state and writes it back with the
// resourceVersion read, retrying on conflict. change returns whether to
// write.
func (b *Breaker) update(ctx context.Context, change func(*breakerState) (bool, error)) error {
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		cm, st, err := b.read(ctx)
		if err != nil {
			return err
		}
		write, err := change(&st)
		if err != nil || !write {
			return err
		}
		data, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if cm == nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.cfg.Namespace, Name: b.cfg.Name}}
			cm.Data = map[string]string{breakerStateKey: string(data)}
			_, err = b.client.CoreV1().ConfigMaps(b.cfg.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// Another replica created it first: start over from theirs.
				return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, b.cfg.Name, err)
			}
			return err
		}
		cm = cm.DeepCopy()
		cm.Data = map[string]string{breakerStateKey: string(data)}
		_, err = b.client.CoreV1().ConfigMaps(b.cfg.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("breaker %s/%s: %w", b.cfg.Namespace, b.cfg.Name, actuator.ErrConflict)
	}
	return err
}

// read returns the ConfigMap (nil when there is none yet) and its state.
// A state that does not parse is an error, not an empty budget: a human
// must look at it.
func (b *Breaker) read(ctx context.Context) (*corev1.ConfigMap, breakerState, error) {
	st := breakerState{Window: map[string]time.Time{}}
	cm, err := b.client.CoreV1().ConfigMaps(b.cfg.Namespace).Get(ctx, b.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, st, nil
	}
	if err != nil {
		return nil, st, fmt.Errorf("breaker %s/%s: %w", b.cfg.Namespace, b.cfg.Name, err)
	}
	st, err = parseBreakerState(cm.Data[breakerStateKey])
	if err != nil {
		return nil, st, fmt.Errorf("breaker %s/%s: %w", b.cfg.Namespace, b.cfg.Name, err)
	}
	return cm, st, nil
}

func parseBreakerState(data string) (breakerState, error) {
	st := breakerState{}
	if data != "" {
		if err := json.Unmarshal([]byte(data), &st); err != nil {
			return breakerState{Window: map[string]time.Time{}}, fmt.Errorf("state does not parse: %w", err)
		}
	}
	if st.Window == nil {
		st.Window = map[string]time.Time{}
	}
	return st, nil
}

// prune drops entries admitted before since and reports whether it did.
func (st *breakerState) prune(since time.Time) bool {
	n := len(st.Window)
	maps.DeleteFunc(st.Window, func(_ string, at time.Time) bool { return at.Before(since) })
	return len(st.Window) != n
}
