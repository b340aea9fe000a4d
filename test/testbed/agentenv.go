package testbed

import (
	"net"
	"os"
	"path/filepath"
)

// AgentAddrs are the listen addresses (host:port) one agent binary of a
// simulated node needs.
type AgentAddrs struct {
	Health, OTLPHTTP, OTLPGRPC, Telemetry string
}

// AgentEnv is the environment of an agent binary on
// distributions/agent/config.yaml that reads this simulated node: its
// dcgm-exporter page, sysfs tree and flight-recorder dumps, exporting to the
// broker. No job id: as the DaemonSet's agent, it takes each dump's job
// from the dump's directory (FRDir/<job>/<attempt>/). It makes stateDir/inspector (the NCCL inspector directory, empty)
// and stateDir/storage is the agent's storage. fast sets the 1 s collection intervals and
// short waits the detection suites and the demo run with; without it the
// config's defaults stay (the overhead measurement).
func (n NodeInputs) AgentEnv(broker, stateDir string, a AgentAddrs, fast bool) ([]string, error) {
	if err := os.MkdirAll(filepath.Join(stateDir, "inspector"), 0o755); err != nil {
		return nil, err
	}
	_, telemetryPort, err := net.SplitHostPort(a.Telemetry)
	if err != nil {
		return nil, err
	}
	env := []string{
		"KAFKA_BROKERS=" + broker,
		"OTELCOL_GPU_HOST_NAME=" + n.Host,
		"GPU_SOURCE=exporter",
		"DCGM_ENDPOINT=" + n.PageURL,
		"GPU_KMSG=false",
		"SYSFS_ROOT=" + n.SysfsRoot,
		"NCCL_FR_DIR=" + n.FRDir,
		"NCCL_INSPECTOR_DIR=" + filepath.Join(stateDir, "inspector"),
		"OTELCOL_GPU_STORAGE_DIR=" + filepath.Join(stateDir, "storage"),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + a.Health,
		"OTLP_HTTP_ENDPOINT=" + a.OTLPHTTP,
		"OTLP_GRPC_ENDPOINT=" + a.OTLPGRPC,
		"OTELCOL_GPU_TELEMETRY_PORT=" + telemetryPort,
	}
	if fast {
		env = append(env,
			"GPU_COLLECTION_INTERVAL=1s",
			"GPU_PROFILING_INTERVAL=1s",
			"IB_COLLECTION_INTERVAL=1s",
			"NCCL_FR_SETTLE_TIME=100ms",
			"STEPSPAN_COLLECTIVE_WAIT=1500ms")
	}
	return env, nil
}
