package dcgmsrc

// The profiling back-off: another profiler (Nsight, CUPTI) can take the
// counters at any time; the device fields go on while profiling waits.

import (
	"time"

	"go.uber.org/zap"
)

// Profiling back-off once DCGM refuses the counters: starts at the
// profiling interval, doubles, stops growing here.
const maxProfilingBackoff = 5 * time.Minute

// profilingState is the profiling back-off (under Source.mu).
type profilingState struct {
	stopped bool // "stopped" was logged and "resumed" not yet
	retryAt time.Time
	backoff time.Duration
	epoch   int // bumped when profiling stops: every watch is redone
}

// profilingRefusedLocked backs profiling off after DCGM refused it, saying
// so once until it resumes.
func (s *Source) profilingRefusedLocked(err error) {
	p := &s.prof
	p.backoff = min(max(2*p.backoff, s.cfg.ProfilingInterval), max(maxProfilingBackoff, s.cfg.ProfilingInterval))
	p.retryAt = s.now().Add(p.backoff)
	p.epoch++
	if !p.stopped {
		p.stopped = true
		s.logger.Warn("DCGM profiling fields unavailable (another profiler such as Nsight or CUPTI may hold the counters); device fields continue, retrying with back-off",
			zap.Error(err), zap.Duration("retry_in", p.backoff))
	}
}

// profilingReadLocked notes a successful profiling read.
func (s *Source) profilingReadLocked() {
	p := &s.prof
	if p.stopped {
		s.logger.Info("DCGM profiling fields available again")
	}
	p.stopped, p.backoff, p.retryAt = false, 0, time.Time{}
}
