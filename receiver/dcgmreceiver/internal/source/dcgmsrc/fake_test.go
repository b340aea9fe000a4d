package dcgmsrc

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// This file is the fake DCGM the tests drive the source through. It
// behaves as go-dcgm and nv-hostengine do where the source depends on it:
// any call but Init before a successful Init fails the test (go-dcgm would
// kill the process); objects (field groups, GPU groups, watches) belong to
// one connection and vanish with it; a field that is not watched reads as
// DCGM_ST_NOT_WATCHED; a field a GPU model does not support reads as DCGM's
// not-supported sentinel; GetValuesSince returns every stored sample at or
// after the since-time. Values and per-model support come from testdata.
// A GPU may have MIG GPU instances (DCGM_FE_GPU_I entities): listed by the
// hierarchy, grouped and watched like GPUs, and measuring only what their
// values hold (framebuffer and profiling fields); every other field of an
// instance reads blank.

const (
	modelL4   = "google-otelopscol-dcgmreceiver_supported-fields_NVIDIA_L4.yaml"
	modelP4   = "google-otelopscol-dcgmreceiver_supported-fields_Tesla_P4.yaml"
	modelA100 = "google-otelopscol-dcgmreceiver_supported-fields_NVIDIA_A100-SXM4-40GB.yaml"
	modelH100 = "google-otelopscol-dcgmreceiver_supported-fields_NVIDIA_H100_80GB_HBM3.yaml"
	l4Scrape  = "cncf-k8s-ai-conformance_kops_NVIDIA-L4_dcgm-exporter-metrics.prom"
	snippet   = "dcgm-exporter_README_quickstart-metrics-snippet.prom"
	a100MIG   = "telegraf_nvidia-smi-q-x_A100-SXM4-80GB.xml"
)

// Messages as DCGM's errorString() writes them; go-dcgm wraps them in
// plain errors for most calls.
const (
	msgConnection = "Host engine connection invalid/disconnected"
	msgInUse      = "The requested operation could not be completed because the affected resource is in use"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// supportFile is Google's per-model list of supported DCGM fields.
type supportFile struct {
	Model       string   `yaml:"model"`
	Supported   []string `yaml:"supported_fields"`
	Unsupported []string `yaml:"unsupported_fields"`
}

func readSupport(t testing.TB, name string) supportFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f supportFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func fieldIDs(t testing.TB, names []string) []model.FieldID {
	t.Helper()
	var ids []model.FieldID
	for _, n := range names {
		f, ok := model.FieldByName(n)
		if !ok {
			t.Fatalf("field %s is not in the catalogue", n)
		}
		ids = append(ids, f.ID)
	}
	slices.Sort(ids)
	return ids
}

// scrape is one GPU of a dcgm-exporter page: its labels and values, typed
// as DCGM typed them (a value written with a decimal point is a double).
type scrape struct {
	labels map[string]string
	values map[model.FieldID]fieldValue
}

func readScrape(t testing.TB, name string) scrape {
	t.Helper()
	file, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	s := scrape{labels: map[string]string{}, values: map[model.FieldID]fieldValue{}}
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
		if open < 0 || end < open {
			t.Fatalf("%s: unexpected line %q", name, line)
		}
		for _, kv := range strings.Split(line[open+1:end], ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			s.labels[k] = strings.Trim(v, `"`)
		}
		f, ok := model.FieldByName(line[:open])
		if !ok {
			continue // e.g. DCGM_FI_DEV_VGPU_LICENSE_STATUS: not collected
		}
		text := strings.TrimSpace(line[end+1:])
		v := fieldValue{Field: f.ID}
		if strings.Contains(text, ".") {
			v.Type = fieldTypeDouble
			if v.Float, err = strconv.ParseFloat(text, 64); err != nil {
				t.Fatal(err)
			}
		} else {
			v.Type = fieldTypeInt64
			if v.Int, err = strconv.ParseInt(text, 10, 64); err != nil {
				t.Fatal(err)
			}
		}
		s.values[f.ID] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

type fakeGPU struct {
	info        deviceInfo
	supported   map[model.FieldID]bool // fields the model lists as supported
	unsupported map[model.FieldID]bool // fields it lists as unsupported
	values      map[model.FieldID]fieldValue
	migs        []*fakeGPUInstance // MIG GPU instances; none: MIG off
}

// fakeGPUInstance is one MIG GPU instance.
type fakeGPUInstance struct {
	entity     uint // DCGM's entity id, unique on the host
	instanceID uint
	computeIDs []uint
	profile    string
	values     map[model.FieldID]fieldValue // what DCGM measures for it
}

// smiLog is the part of `nvidia-smi -q -x` the fake uses.
type smiLog struct {
	Driver string `xml:"driver_version"`
	GPUs   []struct {
		BusID   string `xml:"id,attr"`
		Product string `xml:"product_name"`
		UUID    string `xml:"uuid"`
		MIGMode string `xml:"mig_mode>current_mig"`
		FB      smiFB  `xml:"fb_memory_usage"`
		MIGs    []struct {
			GPUInstance     uint  `xml:"gpu_instance_id"`
			ComputeInstance uint  `xml:"compute_instance_id"`
			FB              smiFB `xml:"fb_memory_usage"`
		} `xml:"mig_devices>mig_device"`
	} `xml:"gpu"`
}

type smiFB struct {
	Total string `xml:"total"` // "19968 MiB"
	Used  string `xml:"used"`
	Free  string `xml:"free"`
}

// values returns the framebuffer as DCGM reports it: int64 MiB.
func (fb smiFB) values(t testing.TB) map[model.FieldID]fieldValue {
	t.Helper()
	out := map[model.FieldID]fieldValue{}
	for id, text := range map[model.FieldID]string{model.FieldFBTotal: fb.Total, model.FieldFBUsed: fb.Used, model.FieldFBFree: fb.Free} {
		mib, err := strconv.ParseInt(strings.TrimSuffix(text, " MiB"), 10, 64)
		if err != nil {
			t.Fatalf("framebuffer %q: %v", text, err)
		}
		out[id] = fieldValue{Type: fieldTypeInt64, Int: mib}
	}
	return out
}

// newFakeMIGGPU is the real A100 80GB of the nvidia-smi fixture, in MIG
// mode with its four GPU instances: identity, framebuffers and instance ids
// from the file, supported fields from the A100 list, other values from
// the L4 scrape as for every fake GPU. Entity ids follow DCGM's numbering,
// 8 per GPU (DCGM_MAX_INSTANCES_PER_GPU).
func newFakeMIGGPU(t testing.TB, id uint) *fakeGPU {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", a100MIG))
	if err != nil {
		t.Fatal(err)
	}
	var smi smiLog
	if err := xml.Unmarshal(raw, &smi); err != nil {
		t.Fatal(err)
	}
	if len(smi.GPUs) != 1 || smi.GPUs[0].MIGMode != "Enabled" {
		t.Fatalf("%s: want one GPU in MIG mode", a100MIG)
	}
	x := smi.GPUs[0]
	g := newFakeGPU(t, id, modelA100)
	g.info = deviceInfo{UUID: x.UUID, Model: x.Product, PCIBusID: x.BusID, DriverVersion: smi.Driver}
	g.values = maps.Clone(g.values)
	maps.Copy(g.values, x.FB.values(t))
	for i, m := range x.MIGs {
		g.migs = append(g.migs, &fakeGPUInstance{
			entity:     id*8 + uint(i),
			instanceID: m.GPUInstance,
			computeIDs: []uint{m.ComputeInstance},
			profile:    "1g.20gb", // inferred: see testdata/SOURCES.txt
			values:     m.FB.values(t),
		})
	}
	return g
}

// newFakeGPU is a GPU of the model that supportName describes, reading the
// real L4 scrape's values. id > 0 gets a UUID of its own.
func newFakeGPU(t testing.TB, id uint, supportName string) *fakeGPU {
	sup := readSupport(t, supportName)
	l4 := readScrape(t, l4Scrape)
	uuid := l4.labels["UUID"]
	if id > 0 {
		uuid = fmt.Sprintf("%s%02d", uuid[:len(uuid)-2], id)
	}
	g := &fakeGPU{
		info: deviceInfo{
			UUID:          uuid,
			Model:         sup.Model,
			PCIBusID:      fmt.Sprintf("00000000:%02X:00.0", 0x31+id),
			DriverVersion: l4.labels["DCGM_FI_DRIVER_VERSION"],
		},
		supported:   map[model.FieldID]bool{},
		unsupported: map[model.FieldID]bool{},
		values:      l4.values,
	}
	for _, f := range fieldIDs(t, sup.Supported) {
		g.supported[f] = true
	}
	for _, f := range fieldIDs(t, sup.Unsupported) {
		g.unsupported[f] = true
	}
	return g
}

func (g *fakeGPU) profilingFields() []model.FieldID {
	var out []model.FieldID
	for f := range g.supported {
		if fd, ok := model.FieldByID(f); ok && fd.Profiling {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

type watchParams struct {
	every, keepAge time.Duration
	keepSamples    int
}

type fakeDCGM struct {
	*FakeHealth // health watches (fakeapi.go)

	t     testing.TB
	clock *fakeClock

	mu            sync.Mutex
	libMissing    bool // Init fails as dlopen("libdcgm.so.4") does
	engineDown    bool // nv-hostengine is gone: Init and every call fail
	profBusyWatch bool // watching profiling fields is refused (DCGM_ST_IN_USE)
	profBusyRead  bool // reading profiling fields is refused (DCGM_ST_IN_USE)
	hangs         map[uint]chan struct{}
	initGate      chan struct{} // when set, Init waits for it to close

	initialized bool
	instance    int // counts successful Inits
	cleanups    int
	gpus        map[uint]*fakeGPU
	next        handle
	fieldGroups map[handle][]model.FieldID
	gpuGroups   map[handle][]uint
	migGroups   map[handle][]uint // groups of GPU instances, by entity id
	watches     map[[2]handle]watchParams
	migErr      error        // what MIGHierarchy fails with
	migReadErr  error        // what GPUInstanceValues fails with
	xids        []fieldValue // nv-hostengine's stored XID samples
	calls       []string
}

func newFakeDCGM(t testing.TB, clock *fakeClock, gpus ...*fakeGPU) *fakeDCGM {
	f := &fakeDCGM{FakeHealth: NewFakeHealth(nil, false), t: t, clock: clock, gpus: map[uint]*fakeGPU{}, hangs: map[uint]chan struct{}{}}
	for i, g := range gpus {
		f.gpus[uint(i)] = g
	}
	f.resetObjects()
	return f
}

func (f *fakeDCGM) resetObjects() {
	f.fieldGroups = map[handle][]model.FieldID{}
	f.gpuGroups = map[handle][]uint{}
	f.migGroups = map[handle][]uint{}
	f.watches = map[[2]handle]watchParams{}
}

// enter records a call and says whether it may proceed. Callers hold f.mu.
func (f *fakeDCGM) enter(name string) error {
	f.calls = append(f.calls, name)
	if !f.initialized {
		f.t.Errorf("fake DCGM: %s called without a successful Init: go-dcgm would kill the process", name)
		return errors.New("not initialized")
	}
	if f.engineDown {
		return fmt.Errorf("error in %s: %s", name, msgConnection)
	}
	return nil
}

func (f *fakeDCGM) callCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == name {
			n++
		}
	}
	return n
}

// killEngine makes nv-hostengine go away: the connection breaks and every
// object of it is gone.
func (f *fakeDCGM) killEngine() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.engineDown = true
	f.resetObjects()
	f.dropHealthGroups()
}

// startEngine brings nv-hostengine back. A restarted engine has lost its
// samples (keepHistory false); a connection blip keeps them.
func (f *fakeDCGM) startEngine(keepHistory bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.engineDown = false
	if !keepHistory {
		f.xids = nil
	}
}

func (f *fakeDCGM) set(fn func(f *fakeDCGM)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// hang makes every call for gpu block until the returned func is called.
func (f *fakeDCGM) hang(gpu uint) (release func()) {
	ch := make(chan struct{})
	f.set(func(f *fakeDCGM) { f.hangs[gpu] = ch })
	var once sync.Once
	return func() {
		once.Do(func() {
			f.set(func(f *fakeDCGM) { delete(f.hangs, gpu) })
			close(ch)
		})
	}
}

func (f *fakeDCGM) waitIfHung(gpu uint) {
	f.mu.Lock()
	ch := f.hangs[gpu]
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// addXID stores an XID occurrence as nv-hostengine does when it sees one.
func (f *fakeDCGM) addXID(gpu uint, code int64, at time.Time) {
	f.set(func(f *fakeDCGM) {
		f.xids = append(f.xids, fieldValue{GPU: gpu, Field: model.FieldXIDErrors, Type: fieldTypeInt64, Int: code, TS: at.UnixMicro()})
	})
}

func (f *fakeDCGM) Init(mode Mode, address string, isUnixSocket bool) (func(), error) {
	f.mu.Lock()
	gate := f.initGate
	f.mu.Unlock()
	if gate != nil {
		<-gate // connecting to an unreachable host takes long
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "Init")
	if f.libMissing {
		return nil, errors.New("libdcgm.so.4 not found")
	}
	if f.initialized {
		f.t.Errorf("fake DCGM: Init while initialized: go-dcgm's ref-counted Init would not reconnect")
	}
	if f.engineDown {
		return nil, fmt.Errorf("error connecting to nv-hostengine: %s", msgConnection)
	}
	f.initialized = true
	f.instance++
	f.resetObjects()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.initialized = false
		f.cleanups++
	}, nil
}

func (f *fakeDCGM) SupportedDevices() ([]uint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("SupportedDevices"); err != nil {
		return nil, err
	}
	var ids []uint
	for id := range f.gpus {
		ids = append(ids, id)
	}
	return ids, nil
}

func (f *fakeDCGM) DeviceInfo(gpu uint) (deviceInfo, error) {
	f.waitIfHung(gpu)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DeviceInfo"); err != nil {
		return deviceInfo{}, err
	}
	g, ok := f.gpus[gpu]
	if !ok {
		return deviceInfo{}, &statusError{Code: -1, Msg: "bad GPU id"}
	}
	return g.info, nil
}

func (f *fakeDCGM) SupportedMetricGroups(gpu uint) ([]metricGroup, error) {
	f.waitIfHung(gpu)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("SupportedMetricGroups"); err != nil {
		return nil, err
	}
	fields := f.gpus[gpu].profilingFields()
	if len(fields) == 0 {
		return nil, &statusError{Code: stProfilingNotSupported, Msg: "Profiling is not supported for this group of GPUs or GPU"}
	}
	return []metricGroup{{Major: 1, Fields: fields}}, nil
}

func (f *fakeDCGM) newHandle() handle {
	f.next++
	return f.next
}

func (f *fakeDCGM) CreateFieldGroup(name string, fields []model.FieldID) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CreateFieldGroup"); err != nil {
		return 0, err
	}
	if len(fields) == 0 || len(fields) > 128 {
		f.t.Errorf("fake DCGM: field group %s with %d fields", name, len(fields))
	}
	h := f.newHandle()
	f.fieldGroups[h] = slices.Clone(fields)
	return h, nil
}

func (f *fakeDCGM) DestroyFieldGroup(fg handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DestroyFieldGroup"); err != nil {
		return err
	}
	delete(f.fieldGroups, fg)
	return nil
}

func (f *fakeDCGM) CreateGPUGroup(name string, gpus []uint) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CreateGPUGroup"); err != nil {
		return 0, err
	}
	h := f.newHandle()
	f.gpuGroups[h] = slices.Clone(gpus)
	return h, nil
}

func (f *fakeDCGM) DestroyGPUGroup(g handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DestroyGPUGroup"); err != nil {
		return err
	}
	f.destroy(g)
	delete(f.gpuGroups, g)
	delete(f.migGroups, g)
	return nil
}

func hasProfiling(fields []model.FieldID) bool {
	for _, id := range fields {
		if fd, ok := model.FieldByID(id); ok && fd.Profiling {
			return true
		}
	}
	return false
}

func (f *fakeDCGM) Watch(fg, g handle, every, keepAge time.Duration, keepSamples int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Watch"); err != nil {
		return err
	}
	fields, okF := f.fieldGroups[fg]
	_, okG := f.gpuGroups[g]
	_, okM := f.migGroups[g]
	if !okF || (!okG && !okM) {
		return &statusError{Code: -1, Msg: "bad group handle"}
	}
	if f.profBusyWatch && hasProfiling(fields) {
		return &statusError{Code: stInUse, Msg: msgInUse}
	}
	f.watches[[2]handle{fg, g}] = watchParams{every: every, keepAge: keepAge, keepSamples: keepSamples}
	return nil
}

func (f *fakeDCGM) Unwatch(fg, g handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Unwatch"); err != nil {
		return err
	}
	delete(f.watches, [2]handle{fg, g})
	return nil
}

// watchedOn reports whether field is watched on gpu, and how.
func (f *fakeDCGM) watchedOn(gpu uint, field model.FieldID) (watchParams, bool) {
	for key, p := range f.watches {
		if slices.Contains(f.fieldGroups[key[0]], field) && slices.Contains(f.gpuGroups[key[1]], gpu) {
			return p, true
		}
	}
	return watchParams{}, false
}

func (f *fakeDCGM) LatestValues(gpu uint, fields []model.FieldID) ([]fieldValue, error) {
	f.waitIfHung(gpu)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("LatestValues"); err != nil {
		return nil, err
	}
	g := f.gpus[gpu]
	if f.profBusyRead && hasProfiling(fields) {
		return nil, &statusError{Code: stInUse, Msg: msgInUse}
	}
	now := f.clock.Now().UnixMicro()
	out := make([]fieldValue, len(fields))
	for i, id := range fields {
		v, known := g.values[id]
		if !known {
			v = fieldValue{Type: fieldTypeInt64, Int: model.Int64Blank} // no data yet
		}
		if fd, ok := model.FieldByID(id); ok && fd.Profiling && !known {
			v = fieldValue{Type: fieldTypeDouble, Float: model.Float64Blank}
		}
		if g.unsupported[id] || (hasProfiling([]model.FieldID{id}) && !g.supported[id]) {
			if v.Type == fieldTypeDouble {
				v.Float = model.Float64Blank + 2 // DCGM_FT_FP64_NOT_SUPPORTED
			} else {
				v.Int = model.Int64Blank + 2 // DCGM_FT_INT64_NOT_SUPPORTED
			}
		}
		v.GPU, v.Field, v.TS = gpu, id, now
		if _, ok := f.watchedOn(gpu, id); !ok {
			v = fieldValue{GPU: gpu, Field: id, Type: v.Type, Status: stNotWatched}
		}
		out[i] = v
	}
	return out, nil
}

func (f *fakeDCGM) ValuesSince(g, fg handle, since time.Time) ([]fieldValue, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("ValuesSince"); err != nil {
		return nil, time.Time{}, err
	}
	gpus, okG := f.gpuGroups[g]
	fields, okF := f.fieldGroups[fg]
	if !okG || !okF {
		return nil, time.Time{}, fmt.Errorf("dcgmGetValuesSince_v2 failed with error code %d", -1)
	}
	if _, ok := f.watches[[2]handle{fg, g}]; !ok {
		return nil, since, nil // nothing is stored for an unwatched field
	}
	next := since
	var out []fieldValue
	for _, v := range f.xids {
		if !slices.Contains(gpus, v.GPU) || !slices.Contains(fields, v.Field) || v.TS < since.UnixMicro() {
			continue
		}
		out = append(out, v)
		if at := time.UnixMicro(v.TS); at.After(next) {
			next = at // the newest sample: the next call returns it again
		}
	}
	return out, next, nil
}

// MIGHierarchy lists every GPU instance, in no particular order (as DCGM's
// hierarchy does not promise one).
func (f *fakeDCGM) MIGHierarchy() ([]gpuInstance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("MIGHierarchy"); err != nil {
		return nil, err
	}
	if f.migErr != nil {
		return nil, f.migErr
	}
	var out []gpuInstance
	for id, g := range f.gpus {
		for _, m := range g.migs {
			out = append(out, gpuInstance{Entity: m.entity, GPU: id, InstanceID: m.instanceID,
				ComputeInstanceIDs: slices.Clone(m.computeIDs), Profile: m.profile})
		}
	}
	return out, nil
}

// gpuInstance finds a GPU instance and its GPU. Callers hold f.mu.
func (f *fakeDCGM) gpuInstance(entity uint) (uint, *fakeGPU, *fakeGPUInstance, bool) {
	for id, g := range f.gpus {
		for _, m := range g.migs {
			if m.entity == entity {
				return id, g, m, true
			}
		}
	}
	return 0, nil, nil, false
}

func (f *fakeDCGM) CreateGPUInstanceGroup(name string, entities []uint) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CreateGPUInstanceGroup"); err != nil {
		return 0, err
	}
	for _, e := range entities {
		if _, _, _, ok := f.gpuInstance(e); !ok {
			return 0, &statusError{Code: -2, Msg: "Bad parameter passed to function"}
		}
	}
	h := f.newHandle()
	f.migGroups[h] = slices.Clone(entities)
	return h, nil
}

// watchedOnInstance reports whether field is watched on a GPU instance.
func (f *fakeDCGM) watchedOnInstance(entity uint, field model.FieldID) bool {
	for key := range f.watches {
		if slices.Contains(f.fieldGroups[key[0]], field) && slices.Contains(f.migGroups[key[1]], entity) {
			return true
		}
	}
	return false
}

func (f *fakeDCGM) GPUInstanceValues(entities []uint, fields []model.FieldID) ([]fieldValue, error) {
	f.mu.Lock()
	parent, _, _, _ := f.gpuInstance(entities[0])
	f.mu.Unlock()
	f.waitIfHung(parent)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("GPUInstanceValues"); err != nil {
		return nil, err
	}
	if f.migReadErr != nil {
		return nil, f.migReadErr
	}
	if f.profBusyRead && hasProfiling(fields) {
		return nil, &statusError{Code: stInUse, Msg: msgInUse}
	}
	now := f.clock.Now().UnixMicro()
	var out []fieldValue
	for _, e := range entities {
		_, g, m, ok := f.gpuInstance(e)
		if !ok {
			out = append(out, fieldValue{GPU: e, Type: fieldTypeInt64, Int: model.Int64Blank + 1}) // NOT_FOUND
			continue
		}
		for _, id := range fields {
			v, known := m.values[id]
			profiling := hasProfiling([]model.FieldID{id})
			switch {
			case profiling && !g.supported[id]:
				v = fieldValue{Type: fieldTypeDouble, Float: model.Float64Blank + 2} // DCGM_FT_FP64_NOT_SUPPORTED
			case !known && profiling:
				v = fieldValue{Type: fieldTypeDouble, Float: model.Float64Blank}
			case !known:
				v = fieldValue{Type: fieldTypeInt64, Int: model.Int64Blank} // not measured per instance
			}
			v.GPU, v.Field, v.TS = e, id, now
			if !f.watchedOnInstance(e, id) {
				v = fieldValue{GPU: e, Field: id, Type: v.Type, Status: stNotWatched}
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// objects returns how many field groups, GPU groups and watches exist.
func (f *fakeDCGM) objects() (fieldGroups, gpuGroups, watches int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fieldGroups), len(f.gpuGroups) + len(f.migGroups), len(f.watches)
}

// harness is a source wired to a fake DCGM, a fake clock and an observed
// logger.
type harness struct {
	t     *testing.T
	clock *fakeClock
	fake  *fakeDCGM
	conns *Connections
	logs  *observer.ObservedLogs
	log   *zap.Logger
}

func newHarness(t *testing.T, gpus ...*fakeGPU) *harness {
	clock := newFakeClock()
	fake := newFakeDCGM(t, clock, gpus...)
	core, logs := observer.New(zapcore.DebugLevel)
	return &harness{
		t:     t,
		clock: clock,
		fake:  fake,
		conns: newConnections(func() api { return fake }, clock.Now),
		logs:  logs,
		log:   zap.New(core),
	}
}

func (h *harness) source(cfg Config) *Source {
	return New(h.conns, cfg, h.log)
}

// count returns how many log records contain msg.
func (h *harness) count(msg string) int {
	return h.logs.FilterMessageSnippet(msg).Len()
}
