package testbed

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// gpuState is what one simulated GPU's dcgm-exporter page shows.
type gpuState struct {
	temp        float64
	throttle    uint64 // DCGM_FI_DEV_CLOCKS_EVENT_REASONS bitmask
	lastXID     int
	sbe, dbe    float64
	nvlinkCRC   float64
	smActive    float64
	utilization float64
}

// portState is one InfiniBand port's sysfs counters.
type portState struct {
	linkDowned, symbolErrors, xmitData, rcvData uint64
	up                                          bool
}

// node is one simulated GPU node: its dcgm-exporter page, its sysfs tree
// and its flight-recorder dump directory.
type node struct {
	job   *job
	index int
	host  string

	mu     sync.Mutex
	gpus   []gpuState
	port   portState
	silent bool // the agent died: the page refuses, the sysfs tree is gone
	rng    *rand.Rand

	sysfsRoot string
	// frRoot is the node agent's flight-recorder directory; frDir is where
	// the node's ranks dump: frRoot/<job>/<attempt>, the Slurm prolog's
	// layout, from which the agent takes the job (flight_recorder::job_path).
	// A job sharing another's nodes (share_nodes_with) dumps below that
	// job's node's frRoot, and its own frRoot stays empty.
	frRoot string
	frDir  string
	// entries per rank: the recorder's ring, newest last
	fr map[int][]frEntry
}

func newNode(j *job, n int) *node {
	nd := &node{
		job:   j,
		index: n,
		host:  j.hostName(n),
		gpus:  make([]gpuState, j.sc.GPUsPerNode),
		port:  portState{up: true},
		rng:   rand.New(rand.NewPCG(j.seed^hashSeed(j.sc.Name), uint64(n)+1)),
		fr:    map[int][]frEntry{},
	}
	for g := range nd.gpus {
		nd.gpus[g] = gpuState{temp: 62 + nd.rng.Float64()*8, smActive: 0.8, utilization: 0.98}
	}
	return nd
}

// tick advances the node's hardware by one scrape interval at step.
func (nd *node) tick(step int) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	active := nd.job.active(step)
	for g := range nd.gpus {
		gs := &nd.gpus[g]
		gs.temp += nd.rng.NormFloat64() * 0.5
		gs.temp = min(max(gs.temp, 55), 75)
		gs.smActive = 0.8 + nd.rng.NormFloat64()*0.02
		if nd.rng.Float64() < 0.002 { // a rare corrected error on a healthy GPU
			gs.sbe++
		}
		for _, in := range active {
			if !in.targets(nd.index, g) {
				continue
			}
			switch in.Kind {
			case InjectNVLinkDegradation:
				gs.nvlinkCRC += in.CRCPerScrape * (0.5 + nd.rng.Float64())
			case InjectThermal:
				gs.temp = 92 + nd.rng.Float64()
				gs.throttle |= 0x40 // hw_thermal_slowdown
			}
		}
	}
	nd.port.xmitData += 1 << 30
	nd.port.rcvData += 1 << 30
	if nd.rng.Float64() < 0.01 {
		nd.port.symbolErrors++
	}
}

// injectOnce applies the one-off effects of the injection at step.
func (nd *node) injectOnce(step int) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, in := range nd.job.sc.injections() {
		if in.Node != nd.index {
			continue
		}
		switch {
		case in.Kind == InjectDBE && step == in.AtStep:
			nd.gpus[in.GPU].dbe++
			nd.gpus[in.GPU].lastXID = 48
		case in.Kind == InjectIBFlap && step >= in.AtStep && (step-in.AtStep)%max(in.PeriodSteps, 1) == 0:
			nd.port.linkDowned++
			nd.port.symbolErrors += 40
		case in.Kind == InjectSilentNode && step == in.AtStep:
			nd.silent = true
		}
	}
}

func (nd *node) isSilent() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.silent
}

// ServeHTTP serves the node's dcgm-exporter page.
func (nd *node) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.silent {
		http.Error(w, "node down", http.StatusServiceUnavailable)
		return
	}
	var b strings.Builder
	type field struct {
		name, kind string
		value      func(*gpuState) float64
	}
	fields := []field{
		{"DCGM_FI_DEV_GPU_TEMP", "gauge", func(g *gpuState) float64 { return g.temp }},
		{"DCGM_FI_DEV_GPU_UTIL", "gauge", func(g *gpuState) float64 { return g.utilization * 100 }},
		{"DCGM_FI_DEV_POWER_USAGE", "gauge", func(g *gpuState) float64 { return 540 + g.temp }},
		{"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", func(g *gpuState) float64 { return float64(g.throttle) }},
		{"DCGM_FI_DEV_XID_ERRORS", "gauge", func(g *gpuState) float64 { return float64(g.lastXID) }},
		{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", func(g *gpuState) float64 { return g.sbe }},
		{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", func(g *gpuState) float64 { return g.dbe }},
		{"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", func(g *gpuState) float64 { return g.nvlinkCRC }},
		{"DCGM_FI_PROF_SM_ACTIVE", "gauge", func(g *gpuState) float64 { return g.smActive }},
	}
	for _, f := range fields {
		fmt.Fprintf(&b, "# HELP %s simulated\n# TYPE %s %s\n", f.name, f.name, f.kind)
		for g := range nd.gpus {
			fmt.Fprintf(&b, "%s{gpu=\"%d\",UUID=\"%s\",device=\"nvidia%d\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"%s\"} %g\n",
				f.name, g, nd.job.gpuUUID(nd.index, g), g, nd.host, f.value(&nd.gpus[g]))
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}

// writeSysfs writes the node's InfiniBand port under sysfsRoot (the
// layout of /sys/class/infiniband); a silent node's tree is removed.
func (nd *node) writeSysfs() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	dev := filepath.Join(nd.sysfsRoot, "class", "infiniband", "mlx5_0")
	if nd.silent {
		return os.RemoveAll(filepath.Join(nd.sysfsRoot, "class"))
	}
	port := filepath.Join(dev, "ports", "1")
	state, phys := "4: ACTIVE", "5: LinkUp"
	files := map[string]string{
		filepath.Join(dev, "hca_type"):                                     "MT4129",
		filepath.Join(dev, "fw_ver"):                                       "28.39.1002",
		filepath.Join(dev, "board_id"):                                     "MT_0000000838",
		filepath.Join(port, "state"):                                       state,
		filepath.Join(port, "phys_state"):                                  phys,
		filepath.Join(port, "rate"):                                        "400 Gb/sec (4X NDR)",
		filepath.Join(port, "link_layer"):                                  "InfiniBand",
		filepath.Join(port, "counters", "link_downed"):                     strconv.FormatUint(nd.port.linkDowned, 10),
		filepath.Join(port, "counters", "symbol_error"):                    strconv.FormatUint(nd.port.symbolErrors, 10),
		filepath.Join(port, "counters", "port_xmit_data"):                  strconv.FormatUint(nd.port.xmitData/4, 10),
		filepath.Join(port, "counters", "port_rcv_data"):                   strconv.FormatUint(nd.port.rcvData/4, 10),
		filepath.Join(port, "counters", "link_error_recovery"):             "0",
		filepath.Join(port, "counters", "port_rcv_errors"):                 "0",
		filepath.Join(port, "counters", "excessive_buffer_overrun_errors"): "0",
	}
	for path, content := range files {
		if err := writeAtomic(path, []byte(content+"\n")); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic writes path through a temporary file and a rename, as sysfs
// readers and the flight-recorder receiver expect whole files.
func writeAtomic(path string, data []byte) error {
	return writeAtomicAt(path, data, time.Time{})
}

// writeAtomicAt is writeAtomic with the file's mtime set to mtime (unless
// zero) before the rename, so that no reader sees the file with another.
func writeAtomicAt(path string, data []byte, mtime time.Time) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	// The temporary name must not match the dump pattern (*_trace_rank_*).
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("testbed: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	return nil
}

// frEntry is one flight-recorder entry of one rank.
type frEntry struct {
	seq       int64
	created   time.Time
	duration  time.Duration
	state     string // scheduled | started | completed
	retired   bool
	timeoutMs int64
}

// frRing is how many entries a dump keeps (TORCH_NCCL_TRACE_BUFFER_SIZE):
// six steps, enough for the receiver (it emits each entry once) and for
// its cross-rank straggler check (at least 16 collectives), and light
// enough that 832 ranks can dump every step.
const frRing = 24

// recordCollectives appends a rank's collectives of one step to its ring.
func (nd *node) recordCollectives(rank int, entries []frEntry) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	ring := append(nd.fr[rank], entries...)
	if len(ring) > frRing {
		ring = ring[len(ring)-frRing:]
	}
	nd.fr[rank] = ring
}

// writeDump writes the rank's flight-recorder dump in the JSON format
// (torch >= 2.4 with TORCH_NCCL_USE_JSON... written by the SDK as
// <host>_nccl_trace_rank_<rank>), atomically. The dump's mtime is the
// moment the rank dumped, on the node's clock as its entries' times are (a
// real dump's both come from the node): the receiver tells a rank that
// stopped by the time between its newest enqueue and its dump. A zero
// dumpedAt is a running rank dumping right after its newest enqueue, in
// the simulation's time: a loaded test machine, slow to write the dumps,
// must not make running ranks look stopped.
func (nd *node) writeDump(rank int, dumpedAt time.Time) error {
	nd.mu.Lock()
	ring := append([]frEntry(nil), nd.fr[rank]...)
	silent := nd.silent
	nd.mu.Unlock()
	if silent || len(ring) == 0 {
		return nil
	}
	world := nd.job.sc.Ranks()
	ranks := make([]string, world)
	for i := range ranks {
		ranks[i] = strconv.Itoa(i)
	}
	var lastEnq, lastStarted, lastDone int64
	var newest time.Time
	entries := make([]map[string]any, 0, len(ring))
	for _, e := range ring {
		if e.created.After(newest) {
			newest = e.created
		}
		lastEnq = max(lastEnq, e.seq)
		if e.state != "scheduled" {
			lastStarted = max(lastStarted, e.seq)
		}
		if e.state == "completed" {
			lastDone = max(lastDone, e.seq)
		}
		m := map[string]any{
			"record_id":                    e.seq - 1,
			"pg_id":                        0,
			"process_group":                []string{"0", "default_pg"},
			"collective_seq_id":            e.seq,
			"p2p_seq_id":                   0,
			"op_id":                        e.seq,
			"profiling_name":               "nccl:all_reduce",
			"time_created_ns":              e.created.UnixNano(),
			"input_sizes":                  [][]int64{{13107200}},
			"input_dtypes":                 []string{"BFloat16"},
			"output_sizes":                 [][]int64{{13107200}},
			"output_dtypes":                []string{"BFloat16"},
			"state":                        e.state,
			"time_discovered_started_ns":   e.created.Add(20 * time.Microsecond).UnixNano(),
			"time_discovered_completed_ns": nil,
			"retired":                      e.retired,
			"timeout_ms":                   e.timeoutMs,
			"is_p2p":                       false,
			"frames":                       []any{},
			"thread_name":                  "pt_nccl_watchdg",
			"thread_id":                    strconv.Itoa(140230000000000 + rank),
		}
		if e.state == "completed" {
			m["time_discovered_completed_ns"] = e.created.Add(e.duration + 50*time.Microsecond).UnixNano()
			m["duration_ms"] = float64(e.duration) / float64(time.Millisecond)
		}

		entries = append(entries, m)
	}
	dump := map[string]any{
		"version":          "2.10",
		"comm_lib_version": "2.27.3",
		"pg_config":        map[string]map[string]string{"0": {"name": "0", "desc": "default_pg", "ranks": "[" + strings.Join(ranks, ", ") + "]"}},
		"pg_status":        map[string]map[string]string{"0": {"last_enqueued_collective": strconv.FormatInt(lastEnq, 10), "last_started_collective": strconv.FormatInt(lastStarted, 10), "last_completed_collective": strconv.FormatInt(lastDone, 10)}},
		"entries":          entries,
	}
	data, err := json.Marshal(dump)
	if err != nil {
		return fmt.Errorf("testbed: encoding the dump of rank %d: %w", rank, err)
	}
	if dumpedAt.IsZero() {
		dumpedAt = newest.Add(time.Millisecond) // entries' times carry the node's clock already
	}
	return writeAtomicAt(filepath.Join(nd.frDir, fmt.Sprintf("%s_nccl_trace_rank_%d", nd.host, rank)), data, dumpedAt)
}

// rewriteDumps writes every rank's dump again, unchanged but for its
// mtime: the ranks of a job that stopped keep dumping (torch dumps on the
// watchdog's timeout and on demand), so that a rank that enqueued nothing
// for the receiver's stall_after shows as stopped.
func (nd *node) rewriteDumps() error {
	nd.mu.Lock()
	ranks := make([]int, 0, len(nd.fr))
	for r := range nd.fr {
		ranks = append(ranks, r)
	}
	nd.mu.Unlock()
	slices.Sort(ranks)
	// The ranks are stuck now: they dump at the node's present time.
	at := time.Now().Add(nd.job.clockOffset(nd.index))
	for _, r := range ranks {
		if err := nd.writeDump(r, at); err != nil {
			return err
		}
	}
	return nil
}
