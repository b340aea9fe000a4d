//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Issue 31: node_exporter (v1.12.1, its infiniband collector alone) and the
// real agent with standalone.yaml read the same sysfs tree; the agent's
// page has node_exporter's node_infiniband_* series exactly: names, help
// texts, types, label names and values, sample values. Both test trees:
// procfs' (mlx4, mlx5 with hw_counters, an Omni-Path hfi1) and
// node_exporter's own (counters that read "N/A (no PMA)").
func TestInfiniBandPageMatchesNodeExporter(t *testing.T) {
	for _, tree := range []string{"procfs-sys", "node_exporter-sys"} {
		t.Run(tree, func(t *testing.T) {
			sysfs := filepath.Join(repoRoot(t), "receiver", "ibreceiver", "testdata", tree)
			neAddr := freeAddr(t)
			ne := startProcess(t, "node_exporter-"+tree, nil, tool(t, "node_exporter"), "--path.sysfs="+sysfs,
				"--collector.disable-defaults", "--collector.infiniband", "--web.listen-address="+neAddr)

			listen, telemetry, health := freeAddr(t), freeAddr(t), freeAddr(t)
			_, telemetryPort, _ := strings.Cut(telemetry, ":")
			env := []string{"SYSFS_ROOT=" + sysfs, "IB_COLLECTION_INTERVAL=1s", "GPU_SOURCE=nvml", "GPU_KMSG=false",
				"DCGM_EXPORTER_LISTEN=" + listen, "OTELCOL_GPU_TELEMETRY_PORT=" + telemetryPort,
				"OTELCOL_GPU_HEALTH_ENDPOINT=" + health, "OTELCOL_GPU_HOST_NAME=ib-node"}
			agent := startProcess(t, "agent-"+tree, env, binary(t, "otelcol-gpu-agent"),
				"--config", filepath.Join(repoRoot(t), "distributions", "agent", "standalone.yaml"))

			var want, got map[string]*dto.MetricFamily
			eventually(t, 30*time.Second, "node_exporter's page", func() (err error) {
				want, err = infinibandFamilies(t, "http://"+neAddr+"/metrics")
				if err == nil && len(want) == 0 {
					err = fmt.Errorf("no node_infiniband_ family yet")
				}
				return err
			}, ne)
			eventually(t, 60*time.Second, "every node_infiniband_ family on the agent's page", func() (err error) {
				got, err = infinibandFamilies(t, "http://"+listen+"/metrics")
				if err != nil {
					return err
				}
				for name := range want {
					if got[name] == nil {
						return fmt.Errorf("%s not on the agent's page yet", name)
					}
				}
				return nil
			}, agent)

			t.Logf("%d families, %d series compared", len(want), seriesCount(want))
			for _, d := range diffFamilies(want, got) {
				t.Error(d)
			}
		})
	}
}

func infinibandFamilies(t *testing.T, url string) (map[string]*dto.MetricFamily, error) {
	page, err := scrapePage(url)
	if err != nil {
		return nil, err
	}
	out := map[string]*dto.MetricFamily{}
	for name, f := range page {
		if strings.HasPrefix(name, "node_infiniband_") {
			out[name] = f
		}
	}
	return out, nil
}

func seriesCount(fams map[string]*dto.MetricFamily) int {
	n := 0
	for _, f := range fams {
		n += len(f.GetMetric())
	}
	return n
}

// diffFamilies compares two pages family by family and series by series:
// help, type, the series' label sets (an empty label value is no label,
// as Prometheus stores it) and their values, both ways.
func diffFamilies(want, got map[string]*dto.MetricFamily) []string {
	var diffs []string
	for _, name := range familyNames(want) {
		if got[name] == nil {
			continue // diffSeriesValues names every missing series
		}
		w, g := want[name], got[name]
		if w.GetType() != g.GetType() || w.GetHelp() != g.GetHelp() {
			diffs = append(diffs, fmt.Sprintf("%s: %s %q, node_exporter's %s %q", name, g.GetType(), g.GetHelp(), w.GetType(), w.GetHelp()))
		}
	}
	diffs = append(diffs, diffSeriesValues(want, got)...)
	// and nothing more on the agent's page
	for _, d := range diffSeriesValues(got, want) {
		diffs = append(diffs, "extra: "+d)
	}
	return diffs
}

// seriesValues maps each series' labels (name="value" pairs, sorted,
// empty values left out) to its value.
func seriesValues(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var pairs []string
		for _, l := range m.GetLabel() {
			if l.GetValue() != "" {
				pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
		}
		sort.Strings(pairs)
		var v float64
		switch {
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
		default:
			v = m.GetUntyped().GetValue()
		}
		out[strings.Join(pairs, ",")] = v
	}
	return out
}
