package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"strings"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostname"
)

// hostName is the configured host name, or the machine's.
func hostName(cfg *Config, logger *zap.Logger) string {
	h, err := hostname.Resolve(cfg.HostName)
	if err != nil {
		logger.Warn("dcgmreceiver: cannot determine the host name, host.name is left unset; set host_name", zap.Error(err))
		return ""
	}
	return h
}

// equalBusID compares PCI bus ids whatever their form: NVML's long form
// 00000000:9b:00.0, the short 0000:9b:00.0, either case.
func equalBusID(a, b string) bool {
	return normalizeBusID(a) == normalizeBusID(b)
}

func normalizeBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	domain, rest, ok := strings.Cut(s, ":")
	if !ok || strings.Count(rest, ":") != 1 {
		return s
	}
	domain = strings.TrimLeft(domain, "0")
	if !strings.Contains(rest, ".") {
		rest += ".0"
	}
	return domain + ":" + rest
}
