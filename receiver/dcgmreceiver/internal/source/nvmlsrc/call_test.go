package nvmlsrc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
)

func newCaller(t *testing.T, syms *symbols) *caller {
	return &caller{ctx: context.Background(), guard: hang.NewGuard(), key: "gpu0", timeout: testTimeout, logger: zaptest.NewLogger(t), syms: syms}
}

func TestCall(t *testing.T) {
	c := newCaller(t, nil)
	v, ok := call(c, "GetIndex", func() (int, nvml.Return) { return 3, nvml.SUCCESS })
	assert.True(t, ok)
	assert.Equal(t, 3, v)

	for _, ret := range []nvml.Return{nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_FOUND, nvml.ERROR_GPU_IS_LOST, nvml.ERROR_UNKNOWN} {
		v, ok = call(c, "GetIndex", func() (int, nvml.Return) { return 3, ret })
		assert.False(t, ok, ret.Error())
		assert.Zero(t, v, "no value with an error")
	}
	assert.NoError(t, c.failed, "errors are not hangs")
}

func TestCallStopsAfterAHang(t *testing.T) {
	c := newCaller(t, nil)
	c.timeout = 10 * time.Millisecond
	release := make(chan struct{})
	_, ok := call(c, "GetIndex", func() (int, nvml.Return) { <-release; return 1, nvml.SUCCESS })
	assert.False(t, ok)
	require.ErrorIs(t, c.failed, hang.ErrStuck)

	_, ok = call(c, "GetName", func() (string, nvml.Return) { t.Error("called after a hang"); return "", nvml.SUCCESS })
	assert.False(t, ok)
	close(release)
	require.NoError(t, c.guard.Wait(context.Background()))
}

func TestCallSkipsMissingFunctions(t *testing.T) {
	lib := dgxa100.New()
	lib.LookupSymbolFunc = func(name string) error {
		if name == "nvmlDeviceGetName" {
			return errors.New("undefined symbol")
		}
		return nil
	}
	syms := newSymbols(lib)
	c := newCaller(t, syms)
	_, ok := call(c, "GetName", func() (string, nvml.Return) { t.Error("missing function called"); return "", nvml.SUCCESS })
	assert.False(t, ok)
	_, ok = call(c, "GetName", func() (string, nvml.Return) { t.Error("missing function called"); return "", nvml.SUCCESS })
	assert.False(t, ok)
	_, ok = call(c, "GetIndex", func() (int, nvml.Return) { return 0, nvml.SUCCESS })
	assert.True(t, ok)
	assert.Len(t, lib.LookupSymbolCalls(), 2, "each name is looked up once")
}

func TestSymbolsWithoutExtensions(t *testing.T) {
	lib := &mock.Interface{ExtensionsFunc: func() nvml.ExtendedInterface { return nil }}
	assert.True(t, newSymbols(lib).has("nvmlDeviceGetName"), "without a way to ask, assume the function is there")
	var none *symbols
	assert.True(t, none.has("nvmlDeviceGetName"))
}
