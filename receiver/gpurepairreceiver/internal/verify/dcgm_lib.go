//go:build cgo

package verify

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/NVIDIA/go-dcgm/pkg/dcgm"
)

// goDCGM is the production DCGMLib: each method is go-dcgm calls. ready
// gates every call but Init: it is set only by a successful Init and
// cleared before the cleanup runs.
type goDCGM struct {
	embedded bool
	address  string
	unix     bool

	mu    sync.Mutex
	ready bool
}

var groupSeq atomic.Uint64

// NewDCGMLib returns the DCGMLib that calls go-dcgm: embedded starts the
// host engine in this process; otherwise it connects to endpoint
// (host:port, /path or unix:///path of an nv-hostengine).
func NewDCGMLib(embedded bool, endpoint string) DCGMLib {
	l := &goDCGM{embedded: embedded}
	if rest, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		l.address, l.unix = rest, true
	} else {
		l.address, l.unix = endpoint, strings.HasPrefix(endpoint, "/")
	}
	return l
}

func (l *goDCGM) Init() (func(), error) {
	var cleanup func()
	var err error
	if l.embedded {
		cleanup, err = dcgm.Init(dcgm.Embedded)
	} else {
		socket := "0"
		if l.unix {
			socket = "1"
		}
		cleanup, err = dcgm.Init(dcgm.Standalone, l.address, socket)
	}
	if err != nil {
		return nil, err
	}
	if cleanup == nil {
		return nil, errors.New("go-dcgm returned no cleanup")
	}
	l.mu.Lock()
	l.ready = true
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		l.ready = false
		l.mu.Unlock()
		cleanup()
	}, nil
}

var errNotInitialized = errors.New("DCGM is not initialized: no call before a successful Init")

func (l *goDCGM) isReady() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready
}

func (l *goDCGM) GPUs() ([]DCGMDevice, error) {
	if !l.isReady() {
		return nil, errNotInitialized
	}
	ids, err := dcgm.GetSupportedDevices()
	if err != nil {
		return nil, err
	}
	out := make([]DCGMDevice, 0, len(ids))
	for _, id := range ids {
		d, err := dcgm.GetDeviceInfo(id)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", id, err)
		}
		out = append(out, DCGMDevice{ID: id, UUID: d.UUID})
	}
	return out, nil
}

func (l *goDCGM) RunDiag(level int, gpuIDs []uint) ([]DCGMDiagResult, error) {
	if !l.isReady() {
		return nil, errNotInitialized
	}
	if len(gpuIDs) == 0 {
		return nil, errors.New("no GPU to diagnose")
	}
	g, err := dcgm.CreateGroup(fmt.Sprintf("otelcol-gpu-verify-%d-%d", os.Getpid(), groupSeq.Add(1)))
	if err != nil {
		return nil, fmt.Errorf("creating the GPU group: %w", err)
	}
	defer func() { _ = dcgm.DestroyGroup(g) }()
	for _, id := range gpuIDs {
		if err := dcgm.AddToGroup(g, id); err != nil {
			return nil, fmt.Errorf("adding GPU %d to the group: %w", id, err)
		}
	}
	res, err := dcgm.RunDiag(dcgm.DiagType(level), g)
	if err != nil {
		return nil, err
	}
	out := make([]DCGMDiagResult, len(res.Software))
	for i, r := range res.Software {
		out[i] = DCGMDiagResult{Test: r.TestName, Status: r.Status, EntityID: r.EntityID, Message: r.ErrorMessage}
	}
	return out, nil
}
