package source // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"

import "context"

// Processes is implemented by sources that can list, per GPU UUID, the ids
// of the processes using the GPU (compute and graphics contexts).
//
// The receiver finds it with a type assertion on its Metrics source and
// hands the result to Slurm job attribution, which reads each process's
// /proc/<pid>/cgroup; the pids are host pids. Each list is sorted and
// without duplicates. A GPU with no processes, or one that does not support
// the query, has an empty list; a GPU whose processes could not be learned
// (its call hung or failed, it has no UUID) is absent from the map.
type Processes interface {
	Processes(ctx context.Context) (map[string][]int, error)
}
