package gpurepairreceiver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// fakeDCGMI writes a dcgmi that records its arguments and prints fixture
// (a sample of internal/verify/testdata), and returns the command template
// and the file its arguments land in.
func fakeDCGMI(t *testing.T, fixture string) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	sample, err := filepath.Abs(filepath.Join("internal", "verify", "testdata", fixture))
	require.NoError(t, err)
	_, err = os.Stat(sample)
	require.NoError(t, err)
	args := filepath.Join(dir, "args")
	script := filepath.Join(dir, "dcgmi")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" > '"+args+"'\ncat '"+sample+"'\n"), 0o755))
	return []string{script, "diag", "-r", "{level}", "-j", "-i", "{gpus}"}, args
}

// withProductionRunners wires the real runners of internal/verify.
func withProductionRunners() envOption {
	return withOpt(func(o *factoryOptions) { o.runners = productionRunners })
}

// A verification through the HTTP API with the real dcgm_diag runner (the
// command backend, a fake dcgmi printing a real sample): DCGM's pass is a
// pass, its failure a failure naming the test.
func TestVerifyWiredDiag(t *testing.T) {
	t.Run("passes", func(t *testing.T) {
		cmd, args := fakeDCGMI(t, "dcgm3_r2_pass_virtualclient.json")
		e := newEnv(t, withProductionRunners(), withConfig(func(c *Config) { c.Verify.Diag.Command = cmd }))
		startVerify(t, e, repair.VerifyRequest{ID: "v1", FaultID: "f-1", GPUs: []string{gpu0},
			Checks: []repair.CheckSpec{{Check: repair.CheckDiag, Level: 2}}})
		j := e.waitJob("v1")
		assert.Equal(t, repair.JobPassed, j.State, j.Detail)
		require.Len(t, j.Results, 1)
		assert.Equal(t, gpu0, j.Results[0].GPU)
		assert.True(t, j.Results[0].Passed, j.Results[0].Detail)
		got, err := os.ReadFile(args)
		require.NoError(t, err)
		assert.Equal(t, "diag -r 2 -j -i 0\n", string(got))
	})
	t.Run("fails", func(t *testing.T) {
		cmd, args := fakeDCGMI(t, "dcgm4_r2_memory_fail.json")
		e := newEnv(t, withProductionRunners(), withConfig(func(c *Config) { c.Verify.Diag.Command = cmd }))
		startVerify(t, e, repair.VerifyRequest{ID: "v1", FaultID: "f-1", Checks: []repair.CheckSpec{{Check: repair.CheckDiag, Level: 2}}})
		j := e.waitJob("v1")
		assert.Equal(t, repair.JobFailed, j.State, j.Detail)
		require.Len(t, j.Results, 2)
		assert.Equal(t, gpu1, j.Results[1].GPU)
		assert.False(t, j.Results[1].Passed)
		var names []string
		for _, tr := range j.Results[1].Tests {
			names = append(names, strings.ToLower(tr.Name))
		}
		assert.Contains(t, names, "memory")
		got, err := os.ReadFile(args)
		require.NoError(t, err)
		assert.Equal(t, "diag -r 2 -j -i 0,1\n", string(got))
	})
	t.Run("output is not DCGM's", func(t *testing.T) {
		e := newEnv(t, withProductionRunners(), withConfig(func(c *Config) {
			c.Verify.Diag.Command = []string{"/bin/echo", "{level}", "{gpus}"}
		}))
		startVerify(t, e, repair.VerifyRequest{ID: "v1", Checks: []repair.CheckSpec{{Check: repair.CheckDiag, Level: 1}}})
		j := e.waitJob("v1")
		assert.Equal(t, repair.JobFailed, j.State)
		require.NotEmpty(t, j.Results)
		assert.Contains(t, j.Results[0].Detail, "could not run")
	})
}

// recordLinks records, until stop, one reading a millisecond of every
// NVLink error counter of gpus; grow makes them grow.
func recordLinks(store *nodestate.MemoryStore, gpus []string, grow bool) (stop func()) {
	var v uint64
	record := func() {
		var s nodestate.GPUSample
		for _, c := range []nodestate.GPUCounter{nodestate.NVLinkCRCFlitErrors, nodestate.NVLinkCRCDataErrors,
			nodestate.NVLinkReplayErrors, nodestate.NVLinkRecoveryErrors} {
			s.Counters[c] = nodestate.Counter{Value: v, Valid: true}
		}
		now := time.Now()
		for _, g := range gpus {
			store.RecordGPU(g, now, s)
		}
		if grow {
			v++
		}
	}
	record() // before the window starts
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
				record()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// links_steady through the HTTP API with the real runner over the
// nodestate extension: steady counters pass, growing ones fail; with no
// nodestate it is not available (refused, never passed).
func TestVerifyWiredLinks(t *testing.T) {
	spec := repair.CheckSpec{Check: repair.CheckLinksSteady, Window: 5 * time.Millisecond}
	for name, grow := range map[string]bool{"steady": false, "growing": true} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, withProductionRunners(), withConfig(func(c *Config) {
				c.Verify.Links.Grace = time.Hour // ends as soon as the readings close the window
				c.Verify.Links.Poll = time.Millisecond
			}))
			stop := recordLinks(e.store, []string{gpu0, gpu1}, grow)
			defer stop()
			startVerify(t, e, repair.VerifyRequest{ID: "v1", Checks: []repair.CheckSpec{spec}})
			j := e.waitJob("v1")
			require.Len(t, j.Results, 3, j.Detail)
			if grow {
				assert.Equal(t, repair.JobFailed, j.State, j.Detail)
				assert.False(t, j.Results[0].Passed)
				assert.Contains(t, j.Results[0].Detail, "NVLink")
			} else {
				assert.Equal(t, repair.JobPassed, j.State, j.Detail)
				for _, r := range j.Results {
					assert.True(t, r.Passed, r.Detail)
				}
			}
		})
	}
	for name, set := range map[string]func(*Config){
		"links disabled": func(c *Config) { c.Verify.Links.Enabled = false },
		"no nodestate":   func(c *Config) { c.Verify.Links.NodeState = "" },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, withProductionRunners(), withConfig(set))
			startVerify(t, e, repair.VerifyRequest{ID: "v1", Checks: []repair.CheckSpec{spec}})
			j := e.waitJob("v1")
			assert.Equal(t, repair.JobRefused, j.State)
			assert.Contains(t, j.Detail, `check "links_steady" is not available`)
		})
	}
}

// Shutdown stops a diagnostic still running (the command's process group
// is killed), closes the runners, and the job ends failed.
func TestVerifyWiredShutdownStopsDiag(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	script := filepath.Join(dir, "dcgmi")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\ntouch '"+started+"'\nexec sleep 3600\n"), 0o755))
	e := newEnv(t, withProductionRunners(), withConfig(func(c *Config) {
		c.Verify.Diag.Command = []string{script, "{level}", "{gpus}"}
		c.Verify.Diag.KillGrace = time.Millisecond
	}))
	startVerify(t, e, repair.VerifyRequest{ID: "v1", Checks: []repair.CheckSpec{{Check: repair.CheckDiag, Level: 1}}})
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, e.rcv.Shutdown(context.Background()))
	j, ok := e.rcv.jobs.get("v1")
	require.True(t, ok)
	assert.Equal(t, repair.JobFailed, j.State)
}

// closingRunner records Close.
type closingRunner struct {
	fakeRunner
	closed chan struct{}
}

func (r *closingRunner) Close(context.Context) error {
	close(r.closed)
	return nil
}

// Shutdown closes every runner that holds something (the library
// diagnostic waits there for a run DCGM could not stop).
func TestShutdownClosesRunners(t *testing.T) {
	r := &closingRunner{closed: make(chan struct{})}
	e := newEnv(t, withOpt(withRunners(map[repair.Check]verify.Runner{repair.CheckDiag: r})))
	require.NoError(t, e.rcv.Shutdown(context.Background()))
	select {
	case <-r.closed:
	default:
		t.Fatal("the runner was not closed at Shutdown")
	}
}
