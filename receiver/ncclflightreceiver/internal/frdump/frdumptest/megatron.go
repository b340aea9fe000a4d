package frdumptest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// Megatron-LM mixture-of-experts job, as its flight recorder dumps look
// (issue 20): 16 ranks, tensor parallel 2, pipeline parallel 2, expert
// parallel 4, data parallel 4, Megatron's rank order tp-ep/dp-pp:
//
//	rank = tp + 2*dp + 8*pp
//
// Every rank is in one group of each kind, created in torch's order (so
// every rank agrees on the names): "0" default_pg (all ranks), "1".."4"
// DATA_PARALLEL_GROUP, "5".."12" TENSOR_MODEL_PARALLEL_GROUP, "13".."20"
// PIPELINE_MODEL_PARALLEL_GROUP, "21".."24" EXPERT_MODEL_PARALLEL_GROUP (the
// experts are spread over the data-parallel ranks: the same members as the
// DP groups), "25".."28" MODEL_PARALLEL_GROUP (tensor x pipeline: ranks of
// both stages, whose progress differs by the pipeline schedule). Schema
// version 2.9, every entry `scheduled` with no start or
// completion time (what the dumps of a hung job hold), Python frames on
// every entry. As in real dumps (megatron_real.go), pg_status and the
// entries' pg_id use each rank's own id of a group, not its name; pg_status'
// last started is unknown (-1) and last completed is what completed.
//
// A step is 4 microbatches of forward then backward (stage 0 sends
// activations to stage 1 and receives gradients back, point-to-point in the
// pipeline group; each MoE layer runs a tensor all_reduce, three expert
// all_to_alls (dispatch 2048x5120, token counts 2048, combine of uneven
// token counts x5120, as the real job's) and a tensor all_reduce; after
// each forward layer the MoE auxiliary-loss statistics are reduced over the
// model-parallel group, which nothing waits for), then the data-parallel
// gradient reduce_scatter and parameter all_gather, a tensor-parallel
// grad-norm all_reduce and a default_pg all_reduce of the loss.
const (
	MoEWorld = 16
	moeTP    = 2
	moeDP    = 4
	moePP    = 2
	moeMB    = 4
)

// MoE scenarios.
const (
	// MoEHealthy: the job runs; every rank dumps on demand, each a few
	// collectives later or earlier than the others.
	MoEHealthy = "healthy"
	// MoEGPUError: the culprits' GPUs fail at the start of microbatch 1's
	// forward: from then on their watchdogs see nothing complete, so those
	// operations stay in flight in their dumps, as the real GPU-error
	// culprit's do (its peers saw the collectives complete: the kernels
	// already queued ran); their CPUs go on enqueuing until they block
	// before the expert all_to_all of microbatch 2; their expert peers
	// enqueue it and block, stage 1 blocks receiving; every rank dumps on
	// the watchdog's timeout, minutes later.
	MoEGPUError = "gpu_error"
	// MoEGILHang: a thread of the culprits holds the Python GIL: they stop
	// in the router of microbatch 1's forward, after its tensor all_reduce
	// and before its first expert all_to_all; everything they enqueued
	// completes, so their dumps hold no entries when only the operations in
	// flight are written (OnlyActive), as the real GIL-stuck ranks' do;
	// their peers enqueue that all_to_all and block.
	MoEGILHang = "gil_hang"
)

// MoEConfig shapes a Megatron MoE job's dumps.
type MoEConfig struct {
	// Scenario is one of MoEHealthy, MoEGPUError, MoEGILHang (default
	// healthy).
	Scenario string
	// Culprits are the ranks that stop, all of one pipeline stage (default
	// 4 and 5: a tensor-parallel pair of stage 0).
	Culprits []int
	// Steps completed before the one the dumps stop in (default 3).
	Steps int
	// Seed varies the dump moments and the enqueue jitter.
	Seed uint64
	// T0Ns is the first enqueue (default 2025-11-29T08:00:00Z).
	T0Ns int64
	// OnlyActive writes only the operations in flight (not completed), as
	// torch does when asked for active entries only (NVIDIA's resiliency
	// extension dumps so): a rank whose every collective completed and
	// that enqueued no other (the culprits of MoEGILHang) writes a dump
	// with no entries.
	OnlyActive bool
}

type moeOp struct {
	kind string // "tp", "ep", "dp", "pp", "world"
	name string // profiling name
	p2p  bool
	mb   int // microbatch, -1 outside
	fwd  bool
	part int // of the expert all_to_alls: 0 dispatch, 1 token counts, 2 combine
}

// sync: the CPU waits for the operation to complete before it enqueues
// the next (the token counts are copied to the host; a received
// microbatch is waited for).
func (o moeOp) sync() bool {
	return (o.kind == "ep" && o.part == 1) || (o.p2p && strings.Contains(o.name, "recv"))
}

// Sizes of the MoE job's operations: hidden 5120, 2048 tokens per
// microbatch and rank, as the real job's dumps record them.
const (
	moeHidden = 5120
	moeTokens = 2048
)

// moeSizes are an operation's input sizes: the dispatch 2048x5120 on every
// rank, the token counts 2048, the combine of the tokens the rank's
// experts got (uneven: they differ per rank and operation) x5120; the
// tensor and other collectives 4096x1x5120.
func moeSizes(o moeOp, rank, step, i int) [][]int64 {
	if o.kind != "ep" {
		return [][]int64{{2 * moeTokens, 1, moeHidden}}
	}
	switch o.part {
	case 0:
		return [][]int64{{moeTokens, moeHidden}}
	case 1:
		return [][]int64{{moeTokens}}
	}
	return [][]int64{{int64(moeTokens - 150 + (rank*37+step*13+i*11)%300), moeHidden}}
}

// MoEStuckSizes is the input size of the collective the peers of a
// MoEGPUError or MoEGILHang job's culprits wait in, the reference
// analyzer's way ("2048x5120"): the dispatch all_to_all.
const MoEStuckSizes = "2048x5120"

// moeProgram is one step of a stage, in program order.
func moeProgram(stage int) []moeOp {
	var ops []moeOp
	layer := func(mb int, fwd bool) {
		if fwd {
			ops = append(ops, moeOp{kind: "tp", name: "nccl:all_reduce", mb: mb, fwd: true})
		}
		ops = append(ops,
			moeOp{kind: "ep", name: "nccl:all_to_all", mb: mb, fwd: fwd, part: 0}, // dispatch
			moeOp{kind: "ep", name: "nccl:all_to_all", mb: mb, fwd: fwd, part: 1}, // token counts
			moeOp{kind: "ep", name: "nccl:all_to_all", mb: mb, fwd: fwd, part: 2}, // combine
			moeOp{kind: "tp", name: "nccl:all_reduce", mb: mb, fwd: fwd},
		)
		if fwd {
			ops = append(ops, moeOp{kind: "mp", name: "nccl:all_reduce", mb: mb, fwd: true})
		}
	}
	for mb := range moeMB {
		if stage == 1 {
			ops = append(ops, moeOp{kind: "pp", name: "nccl:recv 1<-0", p2p: true, mb: mb, fwd: true})
		}
		layer(mb, true)
		if stage == 0 {
			ops = append(ops, moeOp{kind: "pp", name: "nccl:send 0->1", p2p: true, mb: mb, fwd: true})
		}
	}
	for mb := range moeMB {
		if stage == 0 {
			ops = append(ops, moeOp{kind: "pp", name: "nccl:recv 0<-1", p2p: true, mb: mb})
		}
		layer(mb, false)
		if stage == 1 {
			ops = append(ops, moeOp{kind: "pp", name: "nccl:send 1->0", p2p: true, mb: mb})
		}
	}
	ops = append(ops,
		moeOp{kind: "dp", name: "nccl:reduce_scatter", mb: -1},
		moeOp{kind: "dp", name: "nccl:_allgather_base", mb: -1},
		moeOp{kind: "tp", name: "nccl:all_reduce", mb: -1},
		moeOp{kind: "world", name: "nccl:all_reduce", mb: -1},
	)
	return ops
}

// index of the n-th op of the step matching pred, -1 when none.
func findOp(ops []moeOp, pred func(moeOp) bool) int {
	for i, o := range ops {
		if pred(o) {
			return i
		}
	}
	return -1
}

// moeGroups are the job's process groups: name → (desc, members).
type moeGroup struct {
	name, desc string
	ranks      []int
}

func moeGroupsOf() []moeGroup {
	all := make([]int, MoEWorld)
	for i := range all {
		all[i] = i
	}
	gs := []moeGroup{{"0", "default_pg", all}}
	add := func(desc string, ranks []int) {
		gs = append(gs, moeGroup{strconv.Itoa(len(gs)), desc, ranks})
	}
	for pp := range moePP {
		for tp := range moeTP {
			var r []int
			for dp := range moeDP {
				r = append(r, moeRank(tp, dp, pp))
			}
			add("DATA_PARALLEL_GROUP", r)
		}
	}
	for pp := range moePP {
		for dp := range moeDP {
			add("TENSOR_MODEL_PARALLEL_GROUP", []int{moeRank(0, dp, pp), moeRank(1, dp, pp)})
		}
	}
	for dp := range moeDP {
		for tp := range moeTP {
			add("PIPELINE_MODEL_PARALLEL_GROUP", []int{moeRank(tp, dp, 0), moeRank(tp, dp, 1)})
		}
	}
	for pp := range moePP {
		for tp := range moeTP {
			var r []int
			for dp := range moeDP {
				r = append(r, moeRank(tp, dp, pp))
			}
			add("EXPERT_MODEL_PARALLEL_GROUP", r)
		}
	}
	for dp := range moeDP {
		add("MODEL_PARALLEL_GROUP", []int{moeRank(0, dp, 0), moeRank(1, dp, 0), moeRank(0, dp, 1), moeRank(1, dp, 1)})
	}
	return gs
}

func moeRank(tp, dp, pp int) int { return tp + moeTP*dp + moeTP*moeDP*pp }

// MoEGroupOf returns the name and description of rank's group of a kind
// ("tp", "ep", "dp", "pp", "mp", "world").
func MoEGroupOf(rank int, kind string) (name, desc string) {
	want := map[string]string{"tp": "TENSOR_MODEL_PARALLEL_GROUP", "ep": "EXPERT_MODEL_PARALLEL_GROUP",
		"dp": "DATA_PARALLEL_GROUP", "pp": "PIPELINE_MODEL_PARALLEL_GROUP", "mp": "MODEL_PARALLEL_GROUP",
		"world": "default_pg"}[kind]
	for _, g := range moeGroupsOf() {
		if g.desc != want {
			continue
		}
		for _, r := range g.ranks {
			if r == rank {
				return g.name, g.desc
			}
		}
	}
	return "", ""
}

// moeFrames is a Megatron stack for an op: innermost first, as torch lists
// them.
func moeFrames(o moeOp) []frdump.Frame {
	inner := map[string]frdump.Frame{
		"tp":    {Name: "reduce_from_tensor_model_parallel_region", Filename: "megatron/core/tensor_parallel/mappings.py", Line: 231},
		"ep":    {Name: "all_to_all", Filename: "megatron/core/tensor_parallel/mappings.py", Line: 412},
		"dp":    {Name: "start_grad_sync", Filename: "megatron/core/distributed/param_and_grad_buffer.py", Line: 388},
		"pp":    {Name: "_communicate", Filename: "megatron/core/pipeline_parallel/p2p_communication.py", Line: 352},
		"world": {Name: "reduce_loss", Filename: "megatron/training/training.py", Line: 1204},
		"mp":    {Name: "reduce_aux_losses_tracker_across_ranks", Filename: "megatron/core/transformer/moe/moe_utils.py", Line: 563},
	}[o.kind]
	torchFn := map[string]frdump.Frame{
		"tp":    {Name: "all_reduce", Filename: "torch/distributed/distributed_c10d.py", Line: 2806},
		"ep":    {Name: "all_to_all_single", Filename: "torch/distributed/distributed_c10d.py", Line: 4378},
		"dp":    {Name: "reduce_scatter_tensor", Filename: "torch/distributed/distributed_c10d.py", Line: 4189},
		"pp":    {Name: "batch_isend_irecv", Filename: "torch/distributed/distributed_c10d.py", Line: 2669},
		"world": {Name: "all_reduce", Filename: "torch/distributed/distributed_c10d.py", Line: 2806},
		"mp":    {Name: "all_reduce", Filename: "torch/distributed/distributed_c10d.py", Line: 2806},
	}[o.kind]
	frames := []frdump.Frame{torchFn, inner}
	if o.kind == "ep" {
		frames = append(frames,
			frdump.Frame{Name: "token_permutation", Filename: "megatron/core/transformer/moe/token_dispatcher.py", Line: 186},
			frdump.Frame{Name: "forward", Filename: "megatron/core/transformer/moe/moe_layer.py", Line: 144})
	}
	step := frdump.Frame{Name: "forward_step", Filename: "megatron/core/pipeline_parallel/schedules.py", Line: 275}
	if !o.fwd && o.mb >= 0 {
		step = frdump.Frame{Name: "backward_step", Filename: "megatron/core/pipeline_parallel/schedules.py", Line: 379}
	}
	return append(frames, step,
		frdump.Frame{Name: "train_step", Filename: "megatron/training/training.py", Line: 751},
		frdump.Frame{Name: "pretrain", Filename: "megatron/training/training.py", Line: 369},
		frdump.Frame{Name: "<module>", Filename: "pretrain_gpt.py", Line: 286})
}

// MegatronMoE builds the job's 16 dumps, indexed by rank, each with
// DumpedAtNs set (its file's mtime when written to disk).
func MegatronMoE(cfg MoEConfig) []*frdump.Dump {
	if cfg.Scenario == "" {
		cfg.Scenario = MoEHealthy
	}
	if len(cfg.Culprits) == 0 {
		cfg.Culprits = []int{4, 5}
	}
	if cfg.Steps <= 0 {
		cfg.Steps = 3
	}
	if cfg.T0Ns == 0 {
		cfg.T0Ns = 1764403200000000000
	}
	culprit := map[int]bool{}
	for _, r := range cfg.Culprits {
		culprit[r] = true
	}
	seed := cfg.Seed*0x9e3779b97f4a7c15 + 7
	next := func() uint64 {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return seed
	}

	const (
		dt        = int64(3_000_000)       // between enqueues, ns
		stageLag  = int64(18_000_000)      // stage 1 starts a microbatch later
		timeout   = int64(600_000_000_000) // the watchdog's timeout: the hung job dumps then
		nodeSkew  = int64(1_234_567_891)   // the second node's clock
		version   = "2.9"
		threadTag = "python3"
	)
	ver, _ := frdump.ParseVersion(version)
	groups := moeGroupsOf()
	progs := [moePP][]moeOp{moeProgram(0), moeProgram(1)}
	stepDur := int64(len(progs[1]))*dt + stageLag + 50_000_000

	// cut is the number of ops of the incident step each rank enqueued.
	// cut is the number of ops of the incident step rank enqueued, for
	// the culprits of a hang and the ranks of a healthy job; -1 for the
	// others of a hang: they enqueue until they block (blockedAt).
	cut := func(rank int) int {
		stage := rank / (moeTP * moeDP)
		ops := progs[stage]
		switch cfg.Scenario {
		case MoEGPUError, MoEGILHang:
			if !culprit[rank] {
				return -1
			}
			mb := 2
			if cfg.Scenario == MoEGILHang {
				mb = 1
			}
			// stops before the microbatch's first expert all_to_all
			return findOp(ops, func(o moeOp) bool { return o.kind == "ep" && o.fwd && o.mb == mb })
		default:
			// dumps on demand while running, each 0-3 enqueues apart; stage
			// 1 runs a microbatch behind stage 0
			at := int64(len(ops)/2+int(next()%4))*dt - int64(stage)*stageLag
			return min(len(ops), int(at/dt))
		}
	}

	out := make([]*frdump.Dump, MoEWorld)
	clocks := make([]int64, MoEWorld)
	frozen := make([]int, MoEWorld)
	enqueued := make([]int, MoEWorld) // entries each rank enqueued; -1: until it blocks
	for rank := range MoEWorld {
		stage := rank / (moeTP * moeDP)
		ops := progs[stage]
		d := &frdump.Dump{
			Version:        ver,
			PGConfig:       map[string]frdump.PGConfig{},
			PGStatus:       map[string]frdump.PGStatus{},
			CommLibVersion: "2.21.5",
		}
		myGroup := map[string]moeGroup{}
		for _, g := range groups {
			for _, r := range g.ranks {
				if r == rank {
					d.PGConfig[g.name] = frdump.PGConfig{Name: g.name, Desc: g.desc, Ranks: g.ranks}
					d.PGStatus[g.name] = frdump.PGStatus{LastEnqueued: -1, LastStarted: -1, LastCompleted: -1}
					kind := map[string]string{"default_pg": "world", "DATA_PARALLEL_GROUP": "dp",
						"TENSOR_MODEL_PARALLEL_GROUP": "tp", "PIPELINE_MODEL_PARALLEL_GROUP": "pp",
						"EXPERT_MODEL_PARALLEL_GROUP": "ep", "MODEL_PARALLEL_GROUP": "mp"}[g.desc]
					myGroup[kind] = g
				}
			}
		}
		seqs := map[string]int64{}
		var p2pSeq, opID, record int64
		skew := int64(0)
		if rank >= moeTP*moeDP {
			skew = nodeSkew
		}
		emit := func(step int, i int, o moeOp) {
			g := myGroup[o.kind]
			pgID, _ := strconv.ParseInt(g.name, 10, 64)
			opID++
			e := frdump.Entry{
				RecordID: record, PGID: pgID, PGName: g.name, PGDesc: g.desc,
				OpID: opID, ProfilingName: o.name,
				TimeCreatedNs: cfg.T0Ns + skew + int64(step)*stepDur + int64(stage)*stageLag + int64(i)*dt + int64(next()%200_000),
				State:         frdump.StateScheduled,
				TimeoutMs:     600000,
				ThreadName:    threadTag,
				ThreadID:      strconv.Itoa(23456244340032 + rank),
				IsP2P:         o.p2p,
				Frames:        moeFrames(o),
				InputDtypes:   []string{"BFloat16"}, OutputDtypes: []string{"BFloat16"},
			}
			e.InputSizes = moeSizes(o, rank, step, i)
			e.OutputSizes = e.InputSizes
			if o.p2p {
				p2pSeq++
				e.P2PSeqID = p2pSeq
				e.CollectiveSeqID = seqs[g.name]
			} else {
				seqs[g.name]++
				e.CollectiveSeqID = seqs[g.name]
			}
			record++
			d.Entries = append(d.Entries, e)
		}
		// every step the program has, the incident step's whole: what
		// the rank enqueued of it is decided below
		for step := range cfg.Steps + 1 {
			for i, o := range ops {
				emit(step, i, o)
			}
		}
		clocks[rank], frozen[rank] = skew, -1
		enqueued[rank] = -1
		if c := cut(rank); c >= 0 {
			enqueued[rank] = cfg.Steps*len(ops) + c
		}
		if cfg.Scenario == MoEGPUError && culprit[rank] {
			// the GPU fails at the start of microbatch 1's forward
			frozen[rank] = cfg.Steps*len(ops) + findOp(ops, func(o moeOp) bool { return o.fwd && o.mb == 1 })
		}
		out[rank] = d
	}
	members := map[string][]int{}
	for _, g := range groups {
		members[g.name] = g.ranks
	}
	blockedAt(out, members, clocks, enqueued, func(rank, i int) bool {
		ops := progs[rank/(moeTP*moeDP)]
		return ops[i%len(ops)].sync()
	})
	for rank, d := range out {
		d.Entries = d.Entries[:enqueued[rank]]
		var newest int64
		for _, e := range d.Entries {
			newest = max(newest, e.TimeCreatedNs)
			if !e.IsP2P {
				st := d.PGStatus[e.PGName]
				st.LastEnqueued = e.CollectiveSeqID
				d.PGStatus[e.PGName] = st
			}
		}
		switch cfg.Scenario {
		case MoEGPUError, MoEGILHang:
			// every rank dumps when its watchdog times out, each a few
			// seconds apart
			d.DumpedAtNs = newest + timeout + int64(next()%5_000_000_000)
		default:
			d.DumpedAtNs = newest + 1_000_000 + int64(next()%50_000_000)
		}
	}
	realize(out, members, groups, clocks, frozen, cfg.OnlyActive)
	return out
}

// MoEFileName is the name torch gives rank's dump under
// TORCH_FR_DUMP_TEMP_FILE=<dir>/_dump_.
func MoEFileName(rank int) string { return fmt.Sprintf("_dump_%d", rank) }
