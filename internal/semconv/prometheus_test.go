package semconv

import (
	"slices"
	"testing"
)

// Names that Prometheus would store as a hardware signal's, or as the
// host.name, gpu.uuid or gpu.index label, are aliases; the names
// themselves, other cases and other letters are not.
func TestPrometheusAlias(t *testing.T) {
	for _, name := range []string{
		"gpu_ecc_errors", "gpu_ecc_errors_total", "gpu.ecc.errors.total", "gpu..ecc__errors", ".gpu.ecc.errors",
		"_gpu_ecc_errors_", "gpu\u200becc.errors", "gpu-ecc-errors", "gpu:ecc:errors",
		"host_name", "host-name", "gpu_uuid", "gpu_index",
		"gpu_xid", "gpu_health_ecc_dbe_errors", "gpu.health.ecc.dbe.errors", "ib_health_link_downed",
		"DCGM.FI.DEV.XID.ERRORS", "DCGM-FI-DEV",
	} {
		if !PrometheusAlias(name) {
			t.Errorf("%q: Prometheus would store it as a protected name", name)
		}
	}
	for _, name := range []string{
		"", "gpu.ecc.errors", "host.name", "gpu.uuid", "gpu.index", "DCGM_FI_DEV_XID_ERRORS",
		"GPU_ECC_ERRORS", "Host_Name", "gpu_x\u0456d", "gpu.ecc.errors.sbe", "training.loss",
		"iteration.step", "nccl.collectives.count", "service.name", "k0",
	} {
		if PrometheusAlias(name) {
			t.Errorf("%q is no alias of a protected name in Prometheus", name)
		}
	}
}

// Nothing a training script sends legitimately is an alias: the signals
// of the script emitters and the training contract's keys pass.
func TestScriptNamesAreNoAliases(t *testing.T) {
	names := []string{
		AttrTrainingJobID, AttrTrainingAttempt, AttrTrainingRank, AttrTrainingWorldSize, AttrTrainingLocalRank,
		AttrTrainingPPStage, AttrIterationStep, AttrPhaseDataloadNs, AttrPhaseForwardNs, AttrPhaseBackwardNs,
		AttrPhaseOptimizerNs, AttrPhaseCommWaitNs, AttrTrainingTokens, AttrTrainingLoss, AttrTrainingFlops,
		AttrCollectivesCount, AttrCollectivesTotalNs, AttrCollectivesTailNs, AttrCollectivesMaxNs,
		AttrCollectivesMaxName, AttrCollectivesOffsetsNs, AttrCollectivesAnomalies, AttrDurationNs,
		AttrTrainingError, AttrErrorType, AttrEventName, AttrServiceName, AttrProcessPID,
	}
	for _, s := range ruleSignals {
		if slices.Contains(scriptEmitters, s.emitter) {
			names = append(names, s.name)
		}
	}
	for _, name := range names {
		if PrometheusAlias(name) {
			t.Errorf("%q, which scripts send, would be renamed as an alias of a protected name", name)
		}
	}
}

// The check allocates nothing.
func TestPrometheusAliasAllocatesNothing(t *testing.T) {
	for _, name := range []string{"gpu_ecc_errors_total", "nccl.collectives.count", "DCGM.FI.DEV"} {
		if n := testing.AllocsPerRun(100, func() { PrometheusAlias(name) }); n != 0 {
			t.Errorf("%q: %v allocations", name, n)
		}
	}
}

// The names of a script's step span, judged as the provenance processor
// judges each key.
func BenchmarkPrometheusAliasStepSpan(b *testing.B) {
	names := []string{"service.name", "training.job.id", "training.attempt", "training.rank", "training.local_rank",
		"training.world_size", "process.pid", "iteration.step", "training.phase.forward_ns", "training.loss",
		"nccl.collectives.count", "nccl.collectives.total_ns", "nccl.collectives.max_ns"}
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			if PrometheusAlias(n) {
				b.Fatal(n)
			}
		}
	}
}
