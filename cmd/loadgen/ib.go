package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/test/loadtest"
)

// -mode ib: the ib receiver against node_exporter's infiniband collector,
// CPU per scrape on one RoCE sysfs tree, side by side (issue 32).
//
//	go run ./cmd/loadgen -mode ib -ib-rounds 3
var (
	ibDevices      = flag.Int("ib-devices", 4, "ib: RoCE devices in the tree (copies of -ib-fixture)")
	ibFixture      = flag.String("ib-fixture", "receiver/ibreceiver/testdata/procfs-sys/class/infiniband/mlx5_0", "ib: device directory copied -ib-devices times")
	ibInterval     = flag.Duration("ib-interval", 100*time.Millisecond, "ib: the agent's collection_interval and node_exporter's scrape period")
	ibDuration     = flag.Duration("ib-duration", 60*time.Second, "ib: measured window of each process (and of each one's idle window)")
	ibWarmup       = flag.Duration("ib-warmup", 5*time.Second, "ib: time before each window")
	ibRounds       = flag.Int("ib-rounds", 3, "ib: comparisons")
	ibNodeExporter = flag.String("node-exporter", ".tools/bin/node_exporter", "ib: node_exporter binary (v1.12.1)")
	ibNESelf       = flag.Bool("ib-node-exporter-self-metrics", false, "ib: keep node_exporter's own go_*, process_*, promhttp_* series (default: --web.disable-exporter-metrics)")
)

func runIB(ctx context.Context, binDir, agentConfig, runtimeFrom, dir string) error {
	runtime, err := deployedRuntime(runtimeFrom, "agent")
	if err != nil {
		return err
	}
	c, err := loadtest.RunIB(ctx, loadtest.IBOptions{
		Agent: filepath.Join(binDir, "otelcol-gpu-agent"), AgentConfig: agentConfig, NodeExporter: *ibNodeExporter, NodeExporterSelfMetrics: *ibNESelf,
		Fixture: *ibFixture, Devices: *ibDevices, Interval: *ibInterval, Duration: *ibDuration, Warmup: *ibWarmup,
		Rounds: *ibRounds, Runtime: runtime, Dir: dir, Progress: os.Stderr,
	})
	if err != nil {
		return err
	}
	c.WriteMarkdown(os.Stdout)
	return nil
}
