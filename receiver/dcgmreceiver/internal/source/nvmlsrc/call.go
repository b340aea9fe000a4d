package nvmlsrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"

import (
	"context"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
)

// caller makes the NVML calls for one GPU, one after the other, each
// through the guard with its own deadline. After the first call that does
// not come back in time (or once ctx ends) it makes no more calls: failed
// says why.
type caller struct {
	ctx     context.Context
	guard   *hang.Guard
	key     string
	timeout time.Duration
	logger  *zap.Logger
	syms    *symbols
	failed  error
}

// symbols remembers which NVML device functions the loaded library has.
// go-nvml binds C functions lazily, so calling one that an older driver
// lacks would abort the process: call looks each one up first (dlsym, once
// per name). A table is only valid while the library stays loaded.
type symbols struct {
	ext   nvml.ExtendedInterface
	mu    sync.Mutex
	known map[string]bool
}

func newSymbols(lib nvml.Interface) *symbols {
	return &symbols{ext: lib.Extensions(), known: map[string]bool{}}
}

// has reports whether the library has the C function name. Without a way
// to ask (a library that has no extensions), everything is assumed there.
func (s *symbols) has(name string) bool {
	if s == nil || s.ext == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	found, seen := s.known[name]
	if !seen {
		found = s.ext.LookupSymbol(name) == nil
		s.known[name] = found
	}
	return found
}

// call runs one NVML call for c's GPU and reports whether it succeeded.
// what is the go-nvml Device method; a library without its C function
// (nvmlDevice + what) counts as not supported. ERROR_NOT_SUPPORTED and
// friends are expected (the GPU lacks the feature) and quiet; other errors
// are logged at debug level. The values fn returns are only read once fn
// has returned, so a call that is still stuck never races with the caller.
func call[T any](c *caller, what string, fn func() (T, nvml.Return)) (T, bool) {
	var zero T
	if c.failed != nil || !c.syms.has("nvmlDevice"+what) {
		return zero, false
	}
	var (
		out T
		ret nvml.Return
	)
	err := c.guard.Do(c.ctx, c.key, c.timeout, func() error {
		out, ret = fn()
		return nil
	})
	if err != nil {
		c.failed = err
		c.logger.Debug("NVML call did not return", zap.String("gpu", c.key), zap.String("call", what), zap.Error(err))
		return zero, false
	}
	switch ret {
	case nvml.SUCCESS:
		return out, true
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_FOUND, nvml.ERROR_FUNCTION_NOT_FOUND:
		return zero, false
	default:
		c.logger.Debug("NVML call failed", zap.String("gpu", c.key), zap.String("call", what), zap.Error(ret))
		return zero, false
	}
}
