package electionextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/electionextension"

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensioncapabilities"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// election is the extension: the one receiver's election bound now, and
// the components following it.
type election struct {
	component.StartFunc
	component.ShutdownFunc
	id     component.ID
	logger *zap.Logger

	mu       sync.Mutex
	receiver component.ID
	bound    ownership.Election // nil: no receiver offers one now
	readers  map[component.ID]struct{}
}

var (
	_ ownership.Seam                        = (*election)(nil)
	_ extension.Extension                   = (*election)(nil)
	_ extensioncapabilities.PipelineWatcher = (*election)(nil)
)

func newExtension(set extension.Settings) *election {
	return &election{id: set.ID, logger: set.Logger, readers: map[component.ID]struct{}{}}
}

// Offer implements ownership.Seam.
func (x *election) Offer(receiver component.ID, e ownership.Election) (func(), error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.bound != nil {
		return nil, fmt.Errorf("extension %q already carries the election of receiver %q; %q cannot offer another: one gpu_faults consumer group elects the replica that acts (run one gpu_faults receiver)",
			x.id, x.receiver, receiver)
	}
	x.receiver, x.bound = receiver, e
	var once sync.Once
	return func() {
		once.Do(func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			if x.bound == e {
				x.receiver, x.bound = component.ID{}, nil
			}
		})
	}, nil
}

// Follow implements ownership.Seam.
func (x *election) Follow(reader component.ID) ownership.Election {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.readers[reader] = struct{}{}
	return follower{x}
}

// follower reads whatever election is bound when asked.
type follower struct{ x *election }

// Status is the bound receiver's; electing (nobody acts) while none is.
func (f follower) Status() ownership.Status {
	f.x.mu.Lock()
	e := f.x.bound
	f.x.mu.Unlock()
	if e == nil {
		return ownership.Status{Role: ownership.RoleElecting}
	}
	return e.Status()
}

// Ready implements extensioncapabilities.PipelineWatcher: every component
// has started, so a follower without a receiver would wait for ever.
func (x *election) Ready() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	readers := make([]string, 0, len(x.readers))
	for id := range x.readers {
		readers = append(readers, id.String())
	}
	sort.Strings(readers)
	if x.bound == nil && len(readers) > 0 {
		return fmt.Errorf("extension %q: %s act only on the replica the gpu_faults receiver elects, and no gpu_faults receiver runs in this collector's pipelines: they would never act; add the gpu_faults receiver to a pipeline, or remove %q from service::extensions (one replica then acts alone)",
			x.id, strings.Join(readers, ", "), x.id)
	}
	if x.bound != nil {
		x.logger.Info("election: the gpu_faults receiver's consumer group elects the one replica that acts",
			zap.String("receiver", x.receiver.String()), zap.Strings("followed_by", readers))
	}
	return nil
}

// NotReady implements extensioncapabilities.PipelineWatcher.
func (*election) NotReady() error { return nil }
