package k8s

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// Leader elects one active remediator among the gateway replicas with a
// coordination.k8s.io Lease. A replica that loses the lease stands again.
type Leader struct {
	client   kubernetes.Interface
	cfg      LeaseConfig
	identity string
	logger   *zap.Logger
	onChange func(leading bool)

	leading atomic.Bool
	// holder is the Lease's holder as last observed ("" none yet).
	holder atomic.Pointer[string]
	// changeMu orders gains and losses: client-go calls OnStartedLeading
	// on its own goroutine, which may run after the loss it preceded.
	changeMu sync.Mutex
	mu       sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{}
}

var _ actuator.Leader = (*Leader)(nil)

// NewLeader returns a stopped Leader. identity names this replica in the
// Lease (DefaultIdentity when empty); onChange, if not nil, is called on
// every gain and loss of leadership (from the election's goroutine).
func NewLeader(client kubernetes.Interface, cfg LeaseConfig, identity string, logger *zap.Logger, onChange func(leading bool)) (*Leader, error) {
	if identity == "" {
		identity = DefaultIdentity()
	}
	l := &Leader{client: client, cfg: cfg, identity: identity, logger: logger, onChange: onChange}
	if _, err := l.elector(); err != nil {
		return nil, err
	}
	return l, nil
}

// DefaultIdentity is the host (pod) name with a random suffix, so that two
// processes on one host do not both believe they hold the lease.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	return host + "_" + hex.EncodeToString(suffix)
}

// Identity is this replica's name in the Lease.
func (l *Leader) Identity() string { return l.identity }

// IsLeader implements actuator.Leader.
func (l *Leader) IsLeader() bool { return l.leading.Load() }

// Holder is the identity holding the Lease as this replica last observed
// it; "" before the first observation.
func (l *Leader) Holder() string {
	if h := l.holder.Load(); h != nil {
		return *h
	}
	return ""
}

// Start stands for election in the background until Stop or ctx ends.
func (l *Leader) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return errors.New("leader election already started")
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			elector, err := l.elector()
			if err != nil { // validated in NewLeader; cannot happen
				l.logger.Error("leader election", zap.Error(err))
				return
			}
			// Run returns when leadership is lost or ctx ends.
			elector.Run(ctx)
		}
	}()
	return nil
}

// Stop stops acting as leader first, then releases the lease so another
// replica takes over without waiting for it to expire.
func (l *Leader) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	l.setLeading(false)
	cancel()
	<-done
}

// setLeading records a change unless stillValid says it is stale.
func (l *Leader) setLeading(leading bool, stillValid ...func() bool) {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	for _, ok := range stillValid {
		if !ok() {
			return
		}
	}
	if l.leading.Swap(leading) != leading {
		l.logger.Info("remediation leadership changed", zap.Bool("leading", leading), zap.String("identity", l.identity))
		if l.onChange != nil {
			l.onChange(leading)
		}
	}
}

func (l *Leader) elector() (*leaderelection.LeaderElector, error) {
	// client-go's ratios: renew well before the lease expires, retry often
	// enough to renew several times within the deadline.
	duration := l.cfg.Duration
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: l.cfg.Namespace, Name: l.cfg.Name},
			Client:     l.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: l.identity},
		},
		LeaseDuration:   duration,
		RenewDeadline:   duration * 2 / 3,
		RetryPeriod:     duration / 6,
		ReleaseOnCancel: true,
		Name:            l.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			// ctx ends before OnStoppedLeading is called, so a gain
			// that arrives after its loss is dropped here.
			OnStartedLeading: func(ctx context.Context) {
				l.setLeading(true, func() bool { return ctx.Err() == nil })
			},
			OnStoppedLeading: func() { l.setLeading(false) },
			OnNewLeader:      func(identity string) { l.holder.Store(&identity) },
		},
	})
}
