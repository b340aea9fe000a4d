package nvmlsrc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// eventSet is a mock NVML event set that delivers what the test sends.
func eventSet(events <-chan nvml.EventData) *mock.EventSet {
	return &mock.EventSet{
		WaitFunc: func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
			select {
			case e := <-events:
				return e, nvml.SUCCESS
			case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
}

// xidSink collects delivered events.
type xidSink struct {
	events chan model.XIDEvent
}

func newXIDSink() *xidSink { return &xidSink{events: make(chan model.XIDEvent, 16)} }

func (s *xidSink) sink(e model.XIDEvent) { s.events <- e }

func (s *xidSink) next(t *testing.T) model.XIDEvent {
	t.Helper()
	select {
	case e := <-s.events:
		return e
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no XID event delivered")
		return model.XIDEvent{}
	}
}

func xidEvent(dev nvml.Device, code uint64) nvml.EventData {
	return nvml.EventData{
		Device:            dev,
		EventType:         nvml.EventTypeXidCriticalError,
		EventData:         code,
		GpuInstanceId:     noInstance,
		ComputeInstanceId: noInstance,
	}
}

func TestXIDEventsAreDelivered(t *testing.T) {
	srv := newServer()
	events := make(chan nvml.EventData)
	set := eventSet(events)
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	// GPU 7 cannot deliver XID events.
	mockDevice(srv, 7).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	sink := newXIDSink()
	s := startSource(t, srv, sink.sink)

	for i := range 7 {
		calls := mockDevice(srv, i).RegisterEventsCalls()
		require.Len(t, calls, 1)
		assert.Equal(t, uint64(nvml.EventTypeXidCriticalError), calls[0].V)
		assert.Same(t, set, calls[0].EventSet)
	}

	before := time.Now()
	events <- xidEvent(srv.Devices[2], 79)
	got := sink.next(t)
	assert.Equal(t, "nvml", got.Source)
	assert.Equal(t, 79, got.Code)
	assert.Equal(t, 2, got.GPU.Index)
	assert.Equal(t, mockDevice(srv, 2).UUID, got.GPU.UUID)
	assert.Equal(t, "00000000:02:00.0", got.GPU.PCIBusID)
	assert.False(t, got.Time.Before(before))

	// Other event types are not XIDs.
	events <- nvml.EventData{Device: srv.Devices[1], EventType: nvml.EventTypeSingleBitEccError, EventData: 1}
	events <- xidEvent(srv.Devices[1], 48)
	assert.Equal(t, 48, sink.next(t).Code)

	// DCGM_FI_DEV_XID_ERRORS is the last XID of each GPU: 0 until one
	// arrives, absent where XIDs cannot be delivered.
	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldXIDErrors})
	require.NoError(t, err)
	for i, sample := range snap.GPUs {
		switch i {
		case 1:
			assert.Equal(t, []model.Value{{Field: model.FieldXIDErrors, Int: 48}}, sample.Values)
		case 2:
			assert.Equal(t, []model.Value{{Field: model.FieldXIDErrors, Int: 79}}, sample.Values)
		case 7:
			assert.Empty(t, sample.Values)
		default:
			assert.Equal(t, []model.Value{{Field: model.FieldXIDErrors, Int: 0}}, sample.Values, "GPU %d", i)
		}
	}

	shutdown(t, s)
	assert.Len(t, set.FreeCalls(), 1, "the event set is freed at shutdown")
	assert.Empty(t, sink.events)
}

func TestXIDEventForAnUnknownDevice(t *testing.T) {
	srv := newServer()
	events := make(chan nvml.EventData)
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return eventSet(events), nvml.SUCCESS }
	sink := newXIDSink()
	s := startSource(t, srv, sink.sink)
	defer shutdown(t, s)

	// Another handle to GPU 5: found by UUID.
	other := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return mockDevice(srv, 5).UUID, nvml.SUCCESS }}
	events <- xidEvent(other, 94)
	got := sink.next(t)
	assert.Equal(t, 5, got.GPU.Index)
	assert.Equal(t, 94, got.Code)

	// A device nobody knows: delivered, with the GPU unknown.
	stranger := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return "GPU-unknown", nvml.SUCCESS }}
	events <- xidEvent(stranger, 13)
	got = sink.next(t)
	assert.Equal(t, model.GPU{Index: -1}, got.GPU)
	assert.Equal(t, 13, got.Code)

	events <- xidEvent(nil, 31)
	assert.Equal(t, model.GPU{Index: -1}, sink.next(t).GPU)
}

func TestXIDEventOnAMIGDevice(t *testing.T) {
	srv := newServer()
	d := mockDevice(srv, 0)
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	migs := []nvml.Device{}
	for gi := range 2 {
		migs = append(migs, &mock.Device{
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi + 1, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },
			GetNameFunc:              func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB MIG 3g.20gb", nvml.SUCCESS },
		})
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i >= len(migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return migs[i], nvml.SUCCESS
	}
	events := make(chan nvml.EventData)
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return eventSet(events), nvml.SUCCESS }
	sink := newXIDSink()
	s := startSource(t, srv, sink.sink)
	defer shutdown(t, s)

	ev := xidEvent(srv.Devices[0], 43)
	ev.GpuInstanceId, ev.ComputeInstanceId = 2, 0
	events <- ev
	got := sink.next(t)
	require.NotNil(t, got.GPU.MIG)
	assert.Equal(t, model.MIGInstance{GPUInstanceID: 2, ComputeInstanceID: 0, Profile: "3g.20gb"}, *got.GPU.MIG)
	assert.Equal(t, d.UUID, got.GPU.UUID)

	// An instance id no MIG device has: the whole GPU.
	ev.GpuInstanceId = 9
	events <- ev
	assert.Nil(t, sink.next(t).GPU.MIG)

	// The last XID is the parent GPU's.
	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldXIDErrors})
	require.NoError(t, err)
	assert.Equal(t, []model.Value{{Field: model.FieldXIDErrors, Int: 43}}, snap.GPUs[0].Values)
}

func TestXIDWaitErrorsDoNotSpin(t *testing.T) {
	srv := newServer()
	var mu sync.Mutex
	waits := 0
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			mu.Lock()
			waits++
			mu.Unlock()
			return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	s := startSource(t, srv, func(model.XIDEvent) { t.Error("no event expected") })
	time.Sleep(100 * time.Millisecond) // ten wait periods
	shutdown(t, s)

	mu.Lock()
	defer mu.Unlock()
	assert.Positive(t, waits)
	assert.Less(t, waits, 30, "a failing wait must pause, not spin")
}

func TestXIDsUnavailable(t *testing.T) {
	t.Run("no event set", func(t *testing.T) {
		srv := newServer()
		srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		s := startSource(t, srv, func(model.XIDEvent) {})
		defer shutdown(t, s)
		snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldXIDErrors, model.FieldGPUTemp})
		require.NoError(t, err)
		for _, sample := range snap.GPUs {
			assert.NotContains(t, byField(sample.Values), model.FieldXIDErrors)
			assert.Contains(t, byField(sample.Values), model.FieldGPUTemp, "metrics still flow")
		}
	})
	t.Run("no GPU supports them", func(t *testing.T) {
		srv := newServer()
		set := eventSet(nil)
		srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
		for i := range srv.Devices {
			mockDevice(srv, i).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
		}
		s := startSource(t, srv, func(model.XIDEvent) {})
		assert.Len(t, set.FreeCalls(), 1, "an unused event set is freed at once")
		assert.Nil(t, s.xids)
		shutdown(t, s)
		assert.Len(t, set.FreeCalls(), 1)
	})
}

func TestXIDShutdownDoesNotWaitForAStuckWait(t *testing.T) {
	srv := newServer()
	release := make(chan struct{})
	waiting := make(chan struct{})
	var once sync.Once
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			once.Do(func() { close(waiting) })
			<-release
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	s := New(srv, testTimeout, zaptest.NewLogger(t))
	require.NoError(t, s.Start(context.Background(), func(model.XIDEvent) {}))
	watcher := s.xids
	<-waiting

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Shutdown(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "stopping XID events")
	assert.Empty(t, set.FreeCalls(), "the set is not freed while a wait may still use it")

	close(release)
	<-watcher.done
}

func TestSameHandle(t *testing.T) {
	a, b := dgxa100.NewDevice(0), dgxa100.NewDevice(1)
	assert.True(t, sameHandle(a, a))
	assert.False(t, sameHandle(a, b))
	assert.False(t, sameHandle(a, nil))
	assert.False(t, sameHandle(nil, nil))
	// A handle type that cannot be compared must not panic.
	assert.False(t, sameHandle(uncomparable{}, uncomparable{}))
}

// uncomparable is a Device whose dynamic type == would panic on.
type uncomparable struct {
	nvml.Device
	_ []int
}
