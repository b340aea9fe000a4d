package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// The decode budget: what the flight recorder input may hold at once, in
// estimated bytes, whatever the number of jobs, ranks and dumps: the dump
// being decoded (its bytes, its decoded tree, the records built from it)
// and the records every rank keeps for the cross-rank analysis and its
// operations waiting for a later dump (pending). Dumps are decoded one at a
// time; each gets what the records held leave free, and one that needs
// more is skipped (over_decode_budget).
//
// By default it is derived from the process's memory limit: half of the Go
// runtime's (GOMEMLIMIT, which the runtime keeps the heap under by
// collecting harder), else a quarter of the cgroup's (a hard limit the
// runtime knows nothing of: the heap may grow to twice what is live before
// a collection), else a quarter of defaultMemoryLimit.
const (
	// defaultMemoryLimit is assumed where neither GOMEMLIMIT nor a cgroup
	// limit is set: the agent DaemonSet's limits.memory.
	defaultMemoryLimit = 256 << 20
	// minDecodeBudget is the smallest flight_recorder::decode_budget: it
	// reads torch's default dump (2,000 entries, some 370 KB of pickle
	// decoding to a 2.4 MB tree) with room to spare.
	minDecodeBudget = 8 << 20
)

// decodeBudgetSource says where the derived budget came from.
type decodeBudgetSource string

const (
	budgetFromConfig     decodeBudgetSource = "flight_recorder::decode_budget"
	budgetFromGoMemLimit decodeBudgetSource = "half of the Go memory limit (GOMEMLIMIT)"
	budgetFromCgroup     decodeBudgetSource = "a quarter of the cgroup memory limit"
	budgetFromDefault    decodeBudgetSource = "a quarter of 256 MiB (no GOMEMLIMIT, no cgroup memory limit)"
)

// decodeBudgetFor returns the budget: configured when positive, else
// derived from goMemLimit (debug.SetMemoryLimit(-1); math.MaxInt64 when
// unset) and the cgroup limit of the process, found below root ("/").
func decodeBudgetFor(configured, goMemLimit int64, root string) (int64, decodeBudgetSource) {
	switch {
	case configured > 0:
		return configured, budgetFromConfig
	case goMemLimit > 0 && goMemLimit < math.MaxInt64:
		return max(goMemLimit/2, minDecodeBudget), budgetFromGoMemLimit
	}
	if limit, ok := cgroupMemoryLimit(root); ok {
		return max(limit/4, minDecodeBudget), budgetFromCgroup
	}
	return defaultMemoryLimit / 4, budgetFromDefault
}

// processDecodeBudget is decodeBudgetFor this process.
func processDecodeBudget(configured int64) (int64, decodeBudgetSource) {
	return decodeBudgetFor(configured, debug.SetMemoryLimit(-1), "/")
}

// cgroupMemoryLimit reads the memory limit of the cgroup the process is in
// (/proc/self/cgroup below root): cgroup v2's memory.max, else v1's
// memory.limit_in_bytes; "max", or v1's page-rounded MaxInt64, mean none.
// In a container the process's cgroup is the root of its namespace.
func cgroupMemoryLimit(root string) (int64, bool) {
	var v2, v1 string // the process's cgroup paths
	if b, err := os.ReadFile(filepath.Join(root, "proc", "self", "cgroup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				v2 = parts[2]
			case slices.Contains(strings.Split(parts[1], ","), "memory"):
				v1 = parts[2]
			}
		}
	}
	fs := filepath.Join(root, "sys", "fs", "cgroup")
	for _, path := range []string{
		filepath.Join(fs, v2, "memory.max"), filepath.Join(fs, "memory.max"),
		filepath.Join(fs, "memory", v1, "memory.limit_in_bytes"), filepath.Join(fs, "memory", "memory.limit_in_bytes"),
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(s, 10, 64)
		if s == "max" || err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// memoryBudget accounts for what the flight recorder input holds: named
// charges (a rank's records, the pending operations) and the reservation
// of the dump being decoded. The caller serializes its use (ncclReceiver.mu).
type memoryBudget struct {
	limit    int64
	held     map[string]int64
	total    int64 // sum of held
	reserved int64 // the dump in flight
	peak     int64 // the largest total+reserved seen
}

func newMemoryBudget(limit int64) *memoryBudget {
	return &memoryBudget{limit: limit, held: map[string]int64{}}
}

// free is what neither the charges nor a reservation hold.
func (b *memoryBudget) free() int64 { return b.limit - b.total - b.reserved }

// set replaces key's charge with n (0 removes it). Callers set only what a
// reservation covered or less, so the total stays within the limit.
func (b *memoryBudget) set(key string, n int64) {
	b.total += n - b.held[key]
	if n == 0 {
		delete(b.held, key)
	} else {
		b.held[key] = n
	}
	b.note()
}

// reserve holds n for the dump in flight (added to what is reserved),
// reporting false, and holding nothing, when less is free.
func (b *memoryBudget) reserve(n int64) bool {
	if n < 0 || n > b.free() {
		return false
	}
	b.reserved += n
	b.note()
	return true
}

// release gives back n of the reservation.
func (b *memoryBudget) release(n int64) {
	b.reserved = max(b.reserved-n, 0)
}

func (b *memoryBudget) note() { b.peak = max(b.peak, b.total+b.reserved) }
