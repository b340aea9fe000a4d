//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Issue 30, through the shipped binaries: the flight-recorder dumps PyTorch
// wrote on real GPUs for a 16-rank Megatron MoE job (NVIDIA
// nvidia-resiliency-ext's test traces, copied with their provenance into
// the receiver's testdata) land in the agent's dump directory, as a job's
// ranks write them. For each incident the gateway opens exactly one
// nccl.hang fault per culprit rank the reference analyzer names, each
// naming its rank, the process group and the collective the job is
// stuck in; no other rank of the job gets a fault.
func TestRealHangDumpsThroughTheBinaries(t *testing.T) {
	incidents := []struct {
		dir     string
		culprit []string // the reference's missing ranks
		want    []string // in each fault's collective evidence
	}{
		{"lock_gil_1st", []string{"14", "9"}, []string{"pg 72:EXPERT_MODEL_PARALLEL_GROUP", "nccl:all_to_all", "2048x5120", "BFloat16"}},
		{"gpu_error_1st", []string{"12"}, []string{"pg 74:EXPERT_MODEL_PARALLEL_GROUP", "nccl:all_to_all"}},
	}
	root := repoRoot(t)
	r := startProvenanceRig(t, "realfr-n0", "realfr-job")
	for _, inc := range incidents {
		// The agent takes a dump's job and attempt from its directory.
		job := "realfr-" + strings.ReplaceAll(inc.dir, "_", "-")
		dst := filepath.Join(r.frDir, job, "0")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(root, "receiver", "ncclflightreceiver", "testdata", "real", "nvrx-megatron-moe", inc.dir)
		names, err := filepath.Glob(filepath.Join(src, "_dump_*"))
		if err != nil || len(names) != 16 {
			t.Fatalf("%s: %d dumps (%v), want 16", src, len(names), err)
		}
		for _, name := range names {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, filepath.Base(name)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}

		var hangs []keyedFault
		eventually(t, 90*time.Second, inc.dir+": a hang fault per culprit", func() error {
			hangs = hangs[:0]
			for _, f := range faultRecords(r.faults) {
				if f.JobID == job && f.Type == fault.TypeNCCLHang && f.State == fault.StateOpen {
					hangs = append(hangs, f)
				}
			}
			if len(hangs) < len(inc.culprit) {
				return fmt.Errorf("%d open nccl.hang faults of %s, want %d", len(hangs), job, len(inc.culprit))
			}
			return nil
		}, r.all...)
		// Everything the agent sent has been read and decided by now.
		r.waitCaughtUp(t)
		var ranks []string
		for _, f := range faultRecords(r.faults) {
			if f.JobID != job || f.State != fault.StateOpen {
				continue
			}
			if f.Type != fault.TypeNCCLHang || f.Entity.Kind != fault.EntityRank {
				t.Errorf("%s: fault %s %s on %s %s, want only nccl.hang faults of ranks", inc.dir, f.ID, f.Type, f.Entity.Kind, f.Entity.Key)
				continue
			}
			rank := strings.TrimPrefix(f.Entity.Key, job+"/")
			ranks = append(ranks, rank)
			var collective string
			for _, ev := range f.Evidence {
				if ev.Signal == semconv.SignalNCCLHangCollective {
					collective = ev.Text
				}
			}
			for _, w := range inc.want {
				if !strings.Contains(collective, w) {
					t.Errorf("%s: rank %s's fault names collective %q, want %q in it", inc.dir, rank, collective, w)
				}
			}
			if f.HostName != "realfr-n0" {
				t.Errorf("%s: rank %s's fault names host %q, want the agent's", inc.dir, rank, f.HostName)
			}
		}
		sort.Strings(ranks)
		if strings.Join(ranks, ",") != strings.Join(inc.culprit, ",") {
			t.Errorf("%s: open faults of ranks %v, want exactly %v (the reference's missing ranks)", inc.dir, ranks, inc.culprit)
		}
		t.Logf("%s: nccl.hang faults of ranks %v", inc.dir, ranks)
	}
	if t.Failed() {
		for _, p := range r.all {
			p.dumpLog(t, 60)
		}
	}
}
