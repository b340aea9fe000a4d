package shutdowndeadlineextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension"

import (
	"context"
	"errors"
	"os"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension/internal/metadata"
)

var errConfigNotDeadline = errors.New("shutdowndeadlineextension: config is not a *shutdowndeadlineextension.Config")

// NewFactory creates the factory of the shutdown_deadline extension: past
// its deadline it exits the process (os.Exit).
func NewFactory() extension.Factory {
	return newFactory(os.Exit, realTimer)
}

// afterFunc arms a timer that calls f once d has passed and returns the
// function that disarms it (time.AfterFunc's Stop).
type afterFunc func(d time.Duration, f func()) (stop func() bool)

func realTimer(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// newFactory is NewFactory with what ends the process and what measures the
// deadline given: the tests' own, so that no test exits or waits.
func newFactory(exit func(code int), timer afterFunc) extension.Factory {
	return extension.NewFactory(metadata.Type,
		func() component.Config { return createDefaultConfig() },
		func(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			c, ok := cfg.(*Config)
			if !ok {
				return nil, errConfigNotDeadline
			}
			return newExtension(set, c, exit, timer), nil
		},
		metadata.ExtensionStability)
}
