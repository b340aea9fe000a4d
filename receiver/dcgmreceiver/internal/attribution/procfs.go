package attribution // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/attribution"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

const (
	// maxPIDsPerGPU bounds the work per GPU: the first processes that name
	// a job settle it.
	maxPIDsPerGPU = 32
	// maxEnvironBytes bounds the read of one environ file (the kernel
	// allows several MiB; the variables we want are rarely past the start).
	maxEnvironBytes = 1 << 20
	// maxCgroupBytes bounds the read of one cgroup file.
	maxCgroupBytes = 64 << 10
	// maxRunIDLen bounds a torchrun run id taken as an attribute value.
	maxRunIDLen = 256
)

// processJob is what a GPU's processes say about their job.
type processJob struct {
	slurmJobID string
	runID      string // TORCHELASTIC_RUN_ID
}

// readProcesses learns each GPU's job from its processes' /proc entries.
// Processes that exited meanwhile are skipped silently; any other failure
// (permission denied, a read that hangs) is reported once the scan is done.
func (a *Attributor) readProcesses(ctx context.Context, gpus []model.GPU, pids map[string][]int) (deviceMap[processJob], error) {
	root := a.settings.ProcRoot
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("dcgmreceiver: attribution: procfs: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.settings.Timeout)
	defer cancel()

	jobs := deviceMap[processJob]{}
	seen := map[int]processJob{} // one process often drives several GPUs
	var firstErr error
	for _, uuid := range slices.Sorted(maps.Keys(pids)) {
		var found processJob
		for i, pid := range pids[uuid] {
			if i == maxPIDsPerGPU || ctx.Err() != nil {
				break
			}
			job, ok := seen[pid]
			if !ok {
				var err error
				job, err = a.readProcess(ctx, root, pid)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				seen[pid] = job
			}
			if job.slurmJobID != "" {
				found = job // a Slurm job settles it
				break
			}
			if found.runID == "" {
				found = job // a torchrun id outside Slurm, unless a Slurm process follows
			}
		}
		if found != (processJob{}) {
			jobs.add(uuidRef(uuid, wholeGPU), found, gpus)
		}
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = fmt.Errorf("dcgmreceiver: attribution: procfs: scan not finished within %s: %w", a.settings.Timeout, ctx.Err())
	}
	return jobs, firstErr
}

// readProcess reads one process's cgroup and environment under the guard:
// reading environ takes the process's memory-map lock, which a process
// stuck in the GPU driver can hold forever.
func (a *Attributor) readProcess(ctx context.Context, root string, pid int) (processJob, error) {
	if pid <= 0 {
		return processJob{}, nil
	}
	dir := filepath.Join(root, strconv.Itoa(pid))
	var job processJob
	var readErr error
	deadline, _ := ctx.Deadline()
	guardErr := a.procGuard.Do(ctx, "pid "+strconv.Itoa(pid), time.Until(deadline), func() error {
		job, readErr = a.readProcessFiles(dir)
		return nil
	})
	if guardErr != nil {
		return processJob{}, fmt.Errorf("dcgmreceiver: attribution: procfs: reading %s: %w", dir, guardErr)
	}
	return job, readErr
}

// readProcessFiles takes the Slurm job id from the cgroup path (set by
// slurmstepd, the process cannot change it) and falls back to SLURM_JOB_ID
// in the environment, which also holds TORCHELASTIC_RUN_ID.
func readProcessFiles(dir string) (processJob, error) {
	var job processJob
	var errs []error
	cgroup, err := readBounded(filepath.Join(dir, "cgroup"), maxCgroupBytes)
	switch {
	case err == nil:
		job.slurmJobID, _ = parseSlurmCgroup(cgroup)
	case !processGone(err):
		errs = append(errs, err)
	}
	environ, err := readBounded(filepath.Join(dir, "environ"), maxEnvironBytes)
	switch {
	case err == nil:
		envJob, runID := parseEnviron(environ)
		if job.slurmJobID == "" {
			job.slurmJobID = envJob
		}
		job.runID = runID
	case !processGone(err):
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return job, fmt.Errorf("dcgmreceiver: attribution: procfs: %w", errors.Join(errs...))
	}
	return job, nil
}

// parseSlurmCgroup finds the job id in a /proc/<pid>/cgroup file: the
// job_<id> directory below a Slurm one, e.g.
//
//	0::/system.slice/slurmstepd.scope/job_12345/step_0/user/task_0   (cgroup v2)
//	4:devices:/slurm/uid_1000/job_12345/step_0/task_0                (cgroup v1)
//
// A process in its own cgroup namespace sees "0::/" and no job.
func parseSlurmCgroup(content []byte) (string, bool) {
	for len(content) > 0 {
		var line []byte
		line, content, _ = bytes.Cut(content, []byte{'\n'})
		// hierarchy-id:controllers:path; the path may itself hold colons.
		_, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		_, path, ok := bytes.Cut(rest, []byte{':'})
		if !ok {
			continue
		}
		if id, ok := slurmJobInPath(string(path)); ok {
			return id, true
		}
	}
	return "", false
}

func slurmJobInPath(path string) (string, bool) {
	underSlurm := false
	for segment := range strings.SplitSeq(path, "/") {
		if underSlurm {
			if id, ok := strings.CutPrefix(segment, "job_"); ok && isJobNumber(id) {
				return id, true
			}
		}
		if strings.Contains(segment, "slurm") {
			underSlurm = true
		}
	}
	return "", false
}

// isJobNumber accepts a Slurm job id: decimal, fitting in 64 bits.
func isJobNumber(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseEnviron reads the NUL-separated environment for the Slurm job id
// (SLURM_JOB_ID, or its old name SLURM_JOBID) and torchrun's run id.
// torchrun sets TORCHELASTIC_RUN_ID to "none" when no rendezvous id was
// given; that names nothing and is ignored.
func parseEnviron(environ []byte) (slurmJobID, runID string) {
	var oldJobID string
	for len(environ) > 0 {
		var v []byte
		v, environ, _ = bytes.Cut(environ, []byte{0})
		name, value, ok := bytes.Cut(v, []byte{'='})
		if !ok {
			continue
		}
		switch string(name) {
		case "SLURM_JOB_ID":
			if isJobNumber(string(value)) {
				slurmJobID = string(value)
			}
		case "SLURM_JOBID":
			if isJobNumber(string(value)) {
				oldJobID = string(value)
			}
		case "TORCHELASTIC_RUN_ID":
			id := strings.TrimSpace(string(value))
			if id != "" && !strings.EqualFold(id, "none") && len(id) <= maxRunIDLen && !strings.ContainsFunc(id, isControl) {
				runID = id
			}
		}
	}
	if slurmJobID == "" {
		slurmJobID = oldJobID
	}
	return slurmJobID, runID
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// processGone reports errors that only mean the process has exited.
func processGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}
