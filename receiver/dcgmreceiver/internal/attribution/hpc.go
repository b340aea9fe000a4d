package attribution // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/attribution"

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// maxMappingFileBytes bounds how much of a mapping file is read: the job id
// is on its first lines, and a runaway file must not cost a refresh.
const maxMappingFileBytes = 64 << 10

// maxJobIDLen bounds a job id taken from a file; longer is not an id.
const maxJobIDLen = 256

// readHPCJobMapping reads dcgm-exporter's job-mapping directory: a Slurm
// prolog writes one file per GPU, named by GPU index ("3") or by GPU index
// and MIG GPU instance ("3.1"), holding the job ids on it, one a line; the
// epilog removes it. Other names are ignored. A file that cannot be read is
// reported, and the other files still count.
func (a *Attributor) readHPCJobMapping(ctx context.Context, gpus []model.GPU) (deviceMap[string], error) {
	dir := a.settings.HPCJobMappingDir
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("dcgmreceiver: attribution: HPC job mapping: %w", err)
	}
	jobs := deviceMap[string]{}
	var errs []error
	for _, entry := range entries {
		if ctx.Err() != nil {
			break // Refresh reports the cancellation
		}
		ref, ok := parseMappingFileName(entry.Name())
		if !ok {
			a.logger.Debug("GPU attribution: ignoring file in HPC job mapping directory", zap.String("file", entry.Name()))
			continue
		}
		path := filepath.Join(dir, entry.Name())
		job, err := readMappingFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if job != "" {
			jobs.add(ref, job, gpus)
		}
	}
	return jobs, errors.Join(errs...)
}

// parseMappingFileName accepts ^\d+(\.\d+)?$: a GPU index, optionally with
// a MIG GPU instance id.
func parseMappingFileName(name string) (deviceRef, bool) {
	indexText, giText, mig := strings.Cut(name, ".")
	index, ok := parseSmallUint(indexText)
	if !ok {
		return deviceRef{}, false
	}
	if !mig {
		return indexRef(index, wholeGPU), true
	}
	gi, ok := parseSmallUint(giText)
	if !ok {
		return deviceRef{}, false
	}
	return indexRef(index, gi), true
}

// readMappingFile returns the first non-empty line of a mapping file. A
// GPU shared by several jobs lists them all; a metric attribute holds one,
// so the first is kept. An empty file means no job.
func readMappingFile(path string) (string, error) {
	// Stat before Open: opening a FIFO someone left here would block.
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("dcgmreceiver: attribution: HPC job mapping: %w", err)
	}
	if !info.Mode().IsRegular() {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("dcgmreceiver: attribution: HPC job mapping: %w", err)
	}
	defer f.Close()

	lines := bufio.NewScanner(io.LimitReader(f, maxMappingFileBytes))
	lines.Buffer(make([]byte, 0, 512), maxMappingFileBytes)
	for n := 1; lines.Scan(); n++ {
		job := strings.TrimSpace(lines.Text())
		if job == "" {
			continue
		}
		if len(job) > maxJobIDLen || strings.ContainsFunc(job, isControl) {
			return "", fmt.Errorf("dcgmreceiver: attribution: HPC job mapping: %s line %d: not a job id", path, n)
		}
		return job, nil
	}
	if err := lines.Err(); err != nil {
		return "", fmt.Errorf("dcgmreceiver: attribution: HPC job mapping: reading %s: %w", path, err)
	}
	return "", nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
