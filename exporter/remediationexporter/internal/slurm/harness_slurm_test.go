//go:build slurm

package slurm

import (
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm/slurmtest"
)

// slurmCluster is slurmtest's real slurmctld and slurmd daemons, with the
// names these tests use and a platform on the scontrol transport.
type slurmCluster struct {
	*slurmtest.Cluster
	t     *testing.T
	nodes []string
	env   []string
}

// startSlurm brings up a cluster of n nodes gpu-node1..n and waits until
// sinfo shows every node idle.
func startSlurm(t *testing.T, n int) *slurmCluster {
	t.Helper()
	return startSlurmWith(t, n, 0)
}

// startSlurmWith adds cpu nodes without GRES, cpu-node1..cpu.
func startSlurmWith(t *testing.T, gpu, cpu int) *slurmCluster {
	t.Helper()
	return startSlurmOpts(t, slurmtest.Options{GPUNodes: gpu, CPUNodes: cpu})
}

func startSlurmOpts(t *testing.T, opts slurmtest.Options) *slurmCluster {
	t.Helper()
	c := slurmtest.StartOpts(t, opts)
	return &slurmCluster{Cluster: c, t: t, nodes: c.Nodes, env: c.Env}
}

func (c *slurmCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	c.WaitFor(what, cond)
}

func (c *slurmCluster) try(bin string, args ...string) (string, error) { return c.Try(bin, args...) }

func (c *slurmCluster) run(bin string, args ...string) string {
	c.t.Helper()
	return c.Run(bin, args...)
}

func (c *slurmCluster) nodeLine(name string) string { return c.NodeLine(name) }

func (c *slurmCluster) drainReasons() map[string]string { return c.DrainReasons() }

func (c *slurmCluster) startSlurmrestd(apiVersion string) string {
	c.t.Helper()
	return c.StartSlurmrestd(apiVersion)
}

// platform is a Platform on the scontrol transport for this cluster.
func (c *slurmCluster) platform(mutate func(*Config)) *Platform {
	cfg := NewDefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		c.t.Fatal(err)
	}
	return newPlatform(cfg, &scontrolTransport{path: cfg.ScontrolPath, timeout: cfg.Timeout, env: c.env}, nil)
}
