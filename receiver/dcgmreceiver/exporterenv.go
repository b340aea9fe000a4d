package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"fmt"
	"slices"
	"strings"
)

// dcgm-exporter's environment variables, carried over by a user who
// replaces it (issue 31). Three keep dcgm-exporter's meaning in the shipped
// configurations (prometheus-endpoint.yaml, standalone.yaml); every other
// one set in the agent's environment is refused at start under naming
// dcgm_exporter, naming it and what to use instead, rather than silently
// ignored: an operator who set DCGM_EXPORTER_DEVICES_STR expects fewer GPUs
// on the page, one who set DCGM_EXPORTER_WEB_CONFIG_FILE expects TLS.

// exporterEnvHonoured are read by the shipped configurations, with
// dcgm-exporter's meaning (DCGM_EXPORTER_INTERVAL in milliseconds).
var exporterEnvHonoured = []string{"DCGM_EXPORTER_COLLECTORS", "DCGM_EXPORTER_LISTEN", "DCGM_EXPORTER_INTERVAL"}

// exporterEnvOther are dcgm-exporter's variables without the
// DCGM_EXPORTER_ prefix.
var exporterEnvOther = []string{"DCGM_REMOTE_HOSTENGINE_INFO", "DCGM_HPC_JOB_MAPPING_DIR", "DCGM_POD_RESOURCES_KUBELET_SOCKET",
	"DCGM_CONTAINER_RUNTIME_SOCKET"}

// exporterEnvInstead says what replaces a refused variable, where
// something does.
var exporterEnvInstead = map[string]string{
	"DCGM_REMOTE_HOSTENGINE_INFO":                "DCGM_ENDPOINT (host:port of nv-hostengine) with DCGM_MODE=standalone",
	"DCGM_EXPORTER_KUBERNETES":                   "GPU_ATTRIBUTION_KUBERNETES=true",
	"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS": "GPU_POD_LABELS=true (with GPU_ATTRIBUTION_KUBERNETES=true)",
	"DCGM_HPC_JOB_MAPPING_DIR":                   "GPU_ATTRIBUTION_SLURM=true",
	"DCGM_EXPORTER_DEVICES_STR":                  "nothing: every GPU of the node is on the page",
	"DCGM_EXPORTER_USE_OLD_NAMESPACE":            "nothing: only the current DCGM_FI_* names",
	"DCGM_EXPORTER_WEB_CONFIG_FILE":              "nothing: serve the page behind a TLS proxy or keep it on the node's network",
}

// refusedExporterEnv returns an error per dcgm-exporter variable set in
// environ (KEY=VALUE entries) that this receiver does not honour.
func refusedExporterEnv(environ []string) []error {
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DCGM_EXPORTER_") && !slices.Contains(exporterEnvOther, name) {
			continue
		}
		if slices.Contains(exporterEnvHonoured, name) {
			continue
		}
		instead := exporterEnvInstead[name]
		if instead == "" {
			instead = "nothing: unset it"
		}
		errs = append(errs, fmt.Errorf("environment: %s is set: a dcgm-exporter setting this agent does not read (it reads %s with dcgm-exporter's meaning); use %s (docs/migrating-from-dcgm-exporter.md)",
			name, strings.Join(exporterEnvHonoured, ", "), instead))
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}
