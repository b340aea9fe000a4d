package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// Breaker is the Slurm drain budget. The count is never stored: every
// Admit recounts from Slurm the nodes that are drained (or down) with our
// reason prefix and whose reason time lies within the window, so a restart
// or a second replica sees every drain already made. Only the tripped flag
// and the time of the last human reset are stored, in the state file.
//
// Two replicas admitting at the same instant could each see the other's
// drain missing; the exporter runs one active remediator (documented in
// its README), and within a process Admit is serialised and remembers the
// nodes it admitted until Slurm shows them.
type Breaker struct {
	transport transport
	prefix    string
	maxShare  float64
	window    time.Duration
	stateFile string
	logger    *zap.Logger
	now       func() time.Time

	mu sync.Mutex
	// pending: admitted here, perhaps not yet drained in Slurm.
	pending map[string]time.Time
	// memory holds the state when no state file is configured.
	memory breakerState
}

var _ actuator.Breaker = (*Breaker)(nil)

// breakerState is the state file's content.
type breakerState struct {
	Tripped   bool      `json:"tripped"`
	TrippedAt time.Time `json:"tripped_at,omitzero"`
	Detail    string    `json:"detail,omitempty"`
	// ResetAt: drains before it are no longer counted.
	ResetAt time.Time `json:"reset_at,omitzero"`
}

func newBreaker(t transport, prefix string, cfg BreakerConfig, stateFile string, logger *zap.Logger) *Breaker {
	return &Breaker{
		transport: t,
		prefix:    prefix,
		maxShare:  cfg.MaxShare,
		window:    cfg.Window,
		stateFile: stateFile,
		logger:    logger,
		now:       time.Now,
		pending:   make(map[string]time.Time),
	}
}

// limit is how many nodes of total may be drained in a window: at least one.
func (b *Breaker) limit(total int) int {
	return max(1, int(math.Floor(b.maxShare*float64(total)+1e-9)))
}

// Admit implements actuator.Breaker.
func (b *Breaker) Admit(ctx context.Context, node string, now time.Time) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state, err := b.load()
	if err != nil {
		return false, err
	}
	if state.Tripped {
		return false, nil
	}
	counted, total, err := b.count(ctx, state, now, true)
	if err != nil {
		return false, err
	}
	if counted[node] {
		return true, nil
	}
	limit := b.limit(total)
	if len(counted)+1 > limit {
		state = breakerState{
			Tripped:   true,
			TrippedAt: now,
			ResetAt:   state.ResetAt,
			Detail:    fmt.Sprintf("%d of %d nodes drained by this exporter within %s (limit %d); refused %s", len(counted), total, b.window, limit, node),
		}
		if err := b.store(state); err != nil {
			return false, err
		}
		b.logger.Warn("Slurm drain breaker tripped", zap.String("detail", state.Detail))
		return false, nil
	}
	b.pending[node] = now
	return true, nil
}

// count returns the nodes drained by this exporter (or admitted here and
// not yet drained) within the window before now, and how many nodes Slurm
// has. prune forgets the admissions past the window. Callers hold b.mu.
func (b *Breaker) count(ctx context.Context, state breakerState, now time.Time, prune bool) (map[string]bool, int, error) {
	nodes, err := b.transport.nodes(ctx)
	if err != nil {
		return nil, 0, err
	}
	// Slurm reason times have one-second resolution: counting from the
	// reset's whole second errs towards counting too many, never too few.
	since := now.Add(-b.window)
	if resetAt := state.ResetAt.Truncate(time.Second); resetAt.After(since) {
		since = resetAt
	}
	counted := make(map[string]bool)
	for _, n := range nodes {
		if n.unavailable() && isOurReason(n.Reason, b.prefix) && !n.ReasonTime.Before(since) && !n.ReasonTime.After(now.Add(time.Second)) {
			counted[n.Name] = true
		}
	}
	for name, at := range b.pending {
		if at.Before(since) {
			if prune {
				delete(b.pending, name)
			}
			continue
		}
		counted[name] = true
	}
	return counted, len(nodes), nil
}

// State implements actuator.Breaker: it recounts as Admit does, and
// stores nothing.
func (b *Breaker) State(ctx context.Context, now time.Time) (actuator.BreakerState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state, err := b.load()
	if err != nil {
		return actuator.BreakerState{}, err
	}
	counted, total, err := b.count(ctx, state, now, false)
	if err != nil {
		return actuator.BreakerState{}, err
	}
	return actuator.BreakerState{Tripped: state.Tripped, TrippedAt: state.TrippedAt, Detail: state.Detail,
		Used: len(counted), Budget: b.limit(total), Window: b.window}, nil
}

// Refund implements actuator.Breaker: it forgets the node admitted at
// admittedAt and not drained. A drain of ours in Slurm counts regardless.
func (b *Breaker) Refund(_ context.Context, node string, admittedAt time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at, ok := b.pending[node]; ok && at.Equal(admittedAt) {
		delete(b.pending, node)
	}
	return nil
}

// Trip implements actuator.Breaker: the flag, the time and detail in the
// state file (or memory), as Admit stores its own trip; the reset time
// stays, so the recount is unchanged.
func (b *Breaker) Trip(_ context.Context, now time.Time, detail string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state, err := b.load()
	if err != nil || state.Tripped {
		return false, err
	}
	if err := b.store(breakerState{Tripped: true, TrippedAt: now, ResetAt: state.ResetAt, Detail: detail}); err != nil {
		return false, err
	}
	b.logger.Warn("Slurm drain breaker tripped", zap.String("detail", detail))
	return true, nil
}

// Tripped implements actuator.Breaker.
func (b *Breaker) Tripped(context.Context) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state, err := b.load()
	return state.Tripped, err
}

// Reset implements actuator.Breaker: clears the flag and starts a new
// window (drains before now are no longer counted).
func (b *Breaker) Reset(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.pending)
	return b.store(breakerState{ResetAt: b.now()})
}

func isOurReason(reason, prefix string) bool {
	return len(reason) >= len(prefix) && reason[:len(prefix)] == prefix
}

// load reads the state; a missing file is an untripped breaker, an
// unreadable or corrupt one an error (the exporter then acts on nothing).
func (b *Breaker) load() (breakerState, error) {
	if b.stateFile == "" {
		return b.memory, nil
	}
	raw, err := os.ReadFile(b.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return breakerState{}, nil
	}
	if err != nil {
		return breakerState{}, fmt.Errorf("slurm: breaker state: %w", err)
	}
	var s breakerState
	if err := json.Unmarshal(raw, &s); err != nil {
		return breakerState{}, fmt.Errorf("slurm: breaker state %s: %w", b.stateFile, err)
	}
	return s, nil
}

// store writes the state atomically (temporary file, fsync, rename).
func (b *Breaker) store(s breakerState) error {
	if b.stateFile == "" {
		b.memory = s
		return nil
	}
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(b.stateFile)
	f, err := os.CreateTemp(dir, ".slurm-breaker-*")
	if err != nil {
		return fmt.Errorf("slurm: breaker state: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(raw, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("slurm: breaker state: %w", err)
	}
	if err := os.Rename(tmp, b.stateFile); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("slurm: breaker state: %w", err)
	}
	return nil
}
