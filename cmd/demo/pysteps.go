package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// pythonSteps sends the simulated job's step records through the project's
// Python module, as a training script would: one `otelcol_gpu_step.py
// replay` process per node, fed the node's records as JSON lines on its
// stdin, posting them to that node's agent (testbed.Options.StepSink).
type pythonSteps struct {
	python, sdk string
	byHost      map[string]*replayProcess
}

// replayProcess is one node's replay: its child, its stdin and its agent.
type replayProcess struct {
	proc     *process
	stdin    io.WriteCloser
	stdout   *bytes.Buffer // the summary; read once proc is done
	endpoint string        // the node's agent, OTLP/HTTP base URL

	mu      sync.Mutex
	line    []byte
	written int
}

// replaySummary is the line replay prints at the end of its stdin.
type replaySummary struct {
	Records int `json:"records"`
	Sent    int `json:"sent"`
	Dropped int `json:"dropped"`
	Invalid int `json:"invalid"`
}

// startPythonSteps starts one replay process per node; endpoints maps each
// host to its agent's OTLP/HTTP base URL.
func startPythonSteps(ps *procs, logDir, python, sdk string, endpoints map[string]string, hosts []string) (*pythonSteps, error) {
	s := &pythonSteps{python: python, sdk: sdk, byHost: map[string]*replayProcess{}}
	for _, host := range hosts {
		rp := &replayProcess{stdout: &bytes.Buffer{}, endpoint: endpoints[host]}
		// The records name the job, rank and GPU: nothing of the demo's own
		// environment may add to them.
		env := []string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "OTEL_RESOURCE_ATTRIBUTES=", "K8S_POD_UID=", "POD_UID="}
		var err error
		rp.proc, rp.stdin, err = ps.startPiped(3, "python-"+host, logDir, env, rp.stdout, python, sdk, "replay")
		if err != nil {
			return nil, fmt.Errorf("%w (-python %s runs the Python module %s)", err, python, sdk)
		}
		s.byHost[host] = rp
	}
	return s, nil
}

// send is the testbed's StepSink: it writes the node's records to its
// replay process.
func (s *pythonSteps) send(_ context.Context, host string, records []testbed.StepRecord) error {
	rp := s.byHost[host]
	if rp == nil {
		return fmt.Errorf("no Python replay process for node %s", host)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.line = rp.line[:0]
	for i := range records {
		var err error
		if rp.line, err = appendReplayLine(rp.line, &records[i], rp.endpoint); err != nil {
			return err
		}
	}
	if _, err := rp.stdin.Write(rp.line); err != nil {
		return fmt.Errorf("writing step records to %s (%s %s replay): %w; last lines of %s:\n%s",
			rp.proc.Name(), s.python, s.sdk, err, rp.proc.LogPath(), rp.proc.tail(20))
	}
	rp.written += len(records)
	return nil
}

// replayLine is one record as `otelcol_gpu_step.py replay` reads it.
type replayLine struct {
	JobID       string           `json:"job_id"`
	Attempt     int              `json:"attempt"`
	Rank        int              `json:"rank"`
	LocalRank   int              `json:"local_rank"`
	WorldSize   int              `json:"world_size"`
	Host        string           `json:"host"`
	GPUUUID     string           `json:"gpu_uuid"`
	PPStage     *int             `json:"pp_stage,omitempty"`
	ServiceName string           `json:"service_name"`
	Endpoint    string           `json:"endpoint"`
	Step        int              `json:"step"`
	StartNS     int64            `json:"start_ns"`
	EndNS       int64            `json:"end_ns"`
	PhasesNS    map[string]int64 `json:"phases_ns"`
	// Loss is a number, or "NaN", "Infinity", "-Infinity" (not JSON numbers).
	Loss       any              `json:"loss"`
	Attributes map[string]int64 `json:"attributes,omitempty"`
}

func appendReplayLine(buf []byte, rec *testbed.StepRecord, endpoint string) ([]byte, error) {
	l := replayLine{
		JobID: rec.JobID, Attempt: rec.Attempt, Rank: rec.Rank, LocalRank: rec.LocalRank, WorldSize: rec.WorldSize,
		Host: rec.Host, GPUUUID: rec.GPUUUID, ServiceName: "train", Endpoint: endpoint, Step: rec.Step,
		StartNS: rec.Start.UnixNano(), EndNS: rec.End.UnixNano(), PhasesNS: make(map[string]int64, len(rec.Phases)),
		Loss: jsonFloat(rec.Loss),
	}
	if rec.HasPPStage {
		stage := rec.PPStage
		l.PPStage = &stage
	}
	for _, ph := range rec.Phases {
		l.PhasesNS[ph.Name] = int64(ph.Duration)
	}
	if len(rec.Attributes) > 0 {
		l.Attributes = make(map[string]int64, len(rec.Attributes))
		for _, a := range rec.Attributes {
			l.Attributes[a.Key] = a.Value
		}
	}
	data, err := json.Marshal(l)
	if err != nil {
		return buf, fmt.Errorf("encoding the step record of rank %d step %d: %w", rec.Rank, rec.Step, err)
	}
	return append(append(buf, data...), '\n'), nil
}

func jsonFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// finish ends every replay's input, waits up to wait for the processes to
// send what they hold and exit, and adds up their summaries. Records
// written is what the demo handed over. An error names every replay that
// failed or did not account for its records.
func (s *pythonSteps) finish(wait time.Duration) (total replaySummary, written int, err error) {
	for _, rp := range s.byHost {
		rp.proc.finishing.Store(true)
		rp.mu.Lock()
		written += rp.written
		rp.mu.Unlock()
		_ = rp.stdin.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var errs []error
	for _, rp := range s.byHost {
		exited, exitErr := rp.proc.Wait(ctx)
		if !exited {
			errs = append(errs, fmt.Errorf("%s did not exit within %s of the end of its input", rp.proc.Name(), wait))
			continue
		}
		if exitErr != nil {
			errs = append(errs, fmt.Errorf("%s (%s %s replay) failed: %v; last lines of %s:\n%s",
				rp.proc.Name(), s.python, s.sdk, exitErr, rp.proc.LogPath(), rp.proc.tail(20)))
			continue
		}
		var sum replaySummary
		out := strings.TrimSpace(rp.stdout.String())
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			errs = append(errs, fmt.Errorf("%s printed %q, not its summary: %v", rp.proc.Name(), out, err))
			continue
		}
		if sum.Records != rp.written || sum.Invalid != 0 {
			errs = append(errs, fmt.Errorf("%s read %d records (%d invalid) of the %d written; see %s",
				rp.proc.Name(), sum.Records, sum.Invalid, rp.written, rp.proc.LogPath()))
		}
		total.Records += sum.Records
		total.Sent += sum.Sent
		total.Dropped += sum.Dropped
		total.Invalid += sum.Invalid
	}
	return total, written, errors.Join(errs...)
}
