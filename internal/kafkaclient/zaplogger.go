package kafkaclient // import "github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ZapLogger writes franz-go's log lines to a component's zap logger.
type ZapLogger struct{ l *zap.Logger }

// Level implements kgo.Logger: the most verbose level the zap logger keeps.
func (k ZapLogger) Level() kgo.LogLevel {
	switch {
	case k.l.Core().Enabled(zapcore.DebugLevel):
		return kgo.LogLevelDebug
	case k.l.Core().Enabled(zapcore.InfoLevel):
		return kgo.LogLevelInfo
	case k.l.Core().Enabled(zapcore.WarnLevel):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

// Log implements kgo.Logger.
func (k ZapLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		fields = append(fields, zap.Any(key, keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, fields...)
	case kgo.LogLevelInfo:
		k.l.Info(msg, fields...)
	default:
		k.l.Debug(msg, fields...)
	}
}
