package exportersrc

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// Labels dcgm-exporter puts on every sample. Pod labels changed name over
// the exporter's history; every spelling is accepted, the first non-empty
// one wins.
const (
	labelGPU           = "gpu"
	labelUUID          = "UUID"
	labelUUIDLower     = "uuid" // --use-old-namespace and some forks
	labelPCIBusID      = "pci_bus_id"
	labelDevice        = "device"
	labelModelName     = "modelName"
	labelDriverVersion = "DCGM_FI_DRIVER_VERSION"
	labelGPUInstance   = "GPU_I_ID"
	labelMIGProfile    = "GPU_I_PROFILE"
	labelComputeInst   = "GPU_CI_ID"
	// labelHostname is the node dcgm-exporter runs on (NODE_NAME in
	// Kubernetes, else its hostname).
	labelHostname = "Hostname"
)

var (
	podLabels       = []string{"pod", "exported_pod", "pod_name"}
	namespaceLabels = []string{"namespace", "exported_namespace", "pod_namespace"}
	containerLabels = []string{"container", "exported_container", "container_name"}
)

// Stats counts what Translate skipped. None of it is an error: a page with
// fields this receiver does not know, or a GPU that does not support one,
// is normal.
type Stats struct {
	// Values is the number of values put into the snapshot.
	Values int
	// Unknown counts samples whose metric name is not a catalogued DCGM
	// field (or is one that carries no number, like DCGM_FI_DRIVER_VERSION).
	Unknown int
	// Sentinels counts DCGM blank / not-supported values dropped.
	Sentinels int
	// Bad counts samples that could not be used: no or an invalid gpu or MIG
	// label, a summary or histogram, a NaN or -Inf value.
	Bad int
	// Duplicates counts samples of a field already seen for the same GPU and
	// owner; the first one is kept.
	Duplicates int
	// Foreign counts samples whose Hostname label names another node than
	// the one Translate was told is this one; ForeignHost is the first such
	// name.
	Foreign     int
	ForeignHost string
}

// groupKey tells apart the GPUSamples of one page: a GPU (or MIG instance)
// and the workload the exporter attributed it to. dcgm-exporter repeats a
// GPU's series once per pod sharing it, so each (GPU, owner) pair is its own
// sample.
type groupKey struct {
	index  int
	uuid   string
	isMIG  bool
	gi, ci int
	owner  model.Owner
}

// Translate parses a dcgm-exporter page in the Prometheus text format and
// turns it into a snapshot stamped now.
//
//   - Every DCGM_FI_* metric is looked up with model.FieldByName, then, for
//     fields outside the catalogue (a user's counters CSV adds them), with
//     model.FieldIDByName, its kind taken from # TYPE; other names are
//     skipped and counted in Stats.Unknown. # HELP and # TYPE lines are
//     optional.
//   - Samples are grouped per GPU (gpu, UUID and the MIG labels GPU_I_ID,
//     GPU_CI_ID) and owner (pod, namespace, container). A MIG instance is its
//     own GPUSample with GPU.MIG set; GPU_CI_ID defaults to 0, as
//     dcgm-exporter does not print it. Samples come out ordered by GPU
//     index, whole GPU before its MIG instances, then by MIG ids, UUID and
//     owner; values within a sample by field id.
//   - A value is blank, and dropped, when it is at or above DCGM's int64
//     sentinel for Counter fields (the text format prints them as floats:
//     9223372036854775794 reads as 9.223372036854776e18), or IsBlankFloat64
//     for the others (their fp64 sentinels, and the int64 ones above those).
//   - A Counter field with an integral value becomes an Int value; every
//     other value is a Float, as printed. A sample's own timestamp, when the
//     page has one, becomes Value.Time.
//
// It errors only when the text cannot be parsed at all.
//
// ownHost, when not empty, is this node's name: a sample whose Hostname
// label names another node is refused and counted (Stats.Foreign), never
// relabelled; an agent speaks only for its own node. A sample without the
// label is taken as this node's (dcgm-exporter omits it when asked to).
func Translate(r io.Reader, now time.Time, ownHost string) (model.Snapshot, Stats, error) {
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return model.Snapshot{}, Stats{}, fmt.Errorf("dcgmreceiver: exporter: parsing metrics text: %w", err)
	}

	var stats Stats
	snap := model.Snapshot{Time: now}
	groups := make(map[groupKey]int, 8) // key -> index into snap.GPUs
	for name, family := range families {
		field, ok := model.FieldByName(name)
		if !ok {
			field, ok = uncatalogued(name, family)
		}
		if !ok || field.Kind == model.Label {
			stats.Unknown += len(family.GetMetric())
			continue
		}
		for _, metric := range family.GetMetric() {
			value, ok := sampleValue(metric)
			if !ok {
				stats.Bad++
				continue
			}
			if math.IsNaN(value) {
				stats.Bad++
				continue
			}
			if isBlank(field, value) { // +Inf included
				stats.Sentinels++
				continue
			}
			if math.IsInf(value, -1) {
				stats.Bad++
				continue
			}
			if host, foreign := foreignHost(metric.GetLabel(), ownHost); foreign {
				stats.Foreign++
				if stats.ForeignHost == "" {
					stats.ForeignHost = host
				}
				continue
			}
			key, gpu, ok := identify(metric.GetLabel())
			if !ok {
				stats.Bad++
				continue
			}
			i, seen := groups[key]
			if !seen {
				i = len(snap.GPUs)
				groups[key] = i
				snap.GPUs = append(snap.GPUs, model.GPUSample{GPU: gpu, Owner: key.owner, Values: make([]model.Value, 0, 24)})
			}
			sample := &snap.GPUs[i]
			fillIdentity(&sample.GPU, gpu)
			if hasField(sample.Values, field.ID) {
				stats.Duplicates++
				continue
			}
			sample.Values = append(sample.Values, makeValue(field, value, metric.GetTimestampMs()))
			stats.Values++
		}
	}

	// Map iteration order is random: sort so the output is stable.
	for i := range snap.GPUs {
		slices.SortFunc(snap.GPUs[i].Values, func(a, b model.Value) int { return cmp.Compare(a.Field, b.Field) })
	}
	slices.SortFunc(snap.GPUs, compareSamples)
	snap.ForeignSamples = stats.Foreign
	return snap, stats, nil
}

// foreignHost reports whether the sample's Hostname label names another
// node than ownHost, and that name. Names compare without case, and a
// short name matches its fully qualified form (node1, node1.example.com).
func foreignHost(labels []*dto.LabelPair, ownHost string) (string, bool) {
	if ownHost == "" {
		return "", false
	}
	for _, l := range labels {
		if l.GetName() != labelHostname {
			continue
		}
		host := l.GetValue()
		if host == "" || sameHost(host, ownHost) {
			return "", false
		}
		return host, true
	}
	return "", false
}

func sameHost(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	short := func(s string) string { h, _, _ := strings.Cut(s, "."); return h }
	// Only one side may be the short form: node1.a and node1.b differ.
	if strings.Contains(a, ".") != strings.Contains(b, ".") {
		return strings.EqualFold(short(a), short(b))
	}
	return false
}

// sampleValue returns the number of a counter, gauge or untyped sample
// (dcgm-exporter writes no other types).
func sampleValue(m *dto.Metric) (float64, bool) {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false // summaries, histograms: nothing DCGM produces
}

// isBlank reports whether v is one of DCGM's sentinels for the field.
func isBlank(field *model.Field, v float64) bool {
	if field.Kind == model.Counter {
		// Counters are int64 fields that may legitimately pass the fp64
		// sentinel (1.4e14); only the int64 sentinels mean blank.
		return v >= float64(model.Int64Blank)
	}
	return model.IsBlankFloat64(v)
}

// makeValue builds the model value: Int for integral counters, Float
// otherwise.
func makeValue(field *model.Field, v float64, timestampMs int64) model.Value {
	out := model.Value{Field: field.ID}
	if field.Kind == model.Counter && v == math.Trunc(v) && v >= math.MinInt64 && v < math.MaxInt64 {
		out.Int = int64(v)
	} else {
		out.Float = v
		out.IsFloat = true
	}
	if timestampMs != 0 {
		out.Time = time.UnixMilli(timestampMs)
	}
	return out
}

// identify reads the GPU and owner labels of one sample. It fails when the
// gpu index or a MIG id is missing or not a number.
func identify(labels []*dto.LabelPair) (groupKey, model.GPU, bool) {
	var (
		gpu                  model.GPU
		key                  groupKey
		index, giID, ciID    string
		profile              string
		pod, namespace, cont labelChoice
	)
	for _, l := range labels {
		value := l.GetValue()
		if value == "" {
			continue // Prometheus: an empty label is an absent one
		}
		switch name := l.GetName(); name {
		case labelGPU:
			index = value
		case labelUUID, labelUUIDLower:
			if gpu.UUID == "" || name == labelUUID {
				gpu.UUID = value
			}
		case labelPCIBusID:
			gpu.PCIBusID = value
		case labelDevice:
			gpu.Device = value
		case labelModelName:
			gpu.Model = value
		case labelDriverVersion:
			gpu.DriverVersion = value
		case labelGPUInstance:
			giID = value
		case labelComputeInst:
			ciID = value
		case labelMIGProfile:
			profile = value
		default:
			pod.offer(name, value, podLabels)
			namespace.offer(name, value, namespaceLabels)
			cont.offer(name, value, containerLabels)
		}
	}

	n, err := strconv.Atoi(index)
	if err != nil || n < 0 {
		return groupKey{}, model.GPU{}, false
	}
	gpu.Index = n
	if giID != "" || ciID != "" || profile != "" {
		mig := &model.MIGInstance{Profile: profile}
		if mig.GPUInstanceID, err = strconv.Atoi(giID); err != nil || mig.GPUInstanceID < 0 {
			return groupKey{}, model.GPU{}, false
		}
		if ciID != "" {
			if mig.ComputeInstanceID, err = strconv.Atoi(ciID); err != nil || mig.ComputeInstanceID < 0 {
				return groupKey{}, model.GPU{}, false
			}
		}
		gpu.MIG = mig
		key.isMIG, key.gi, key.ci = true, mig.GPUInstanceID, mig.ComputeInstanceID
	}
	key.index, key.uuid = gpu.Index, gpu.UUID
	key.owner = model.Owner{PodName: pod.value, Namespace: namespace.value, Container: cont.value}
	return key, gpu, true
}

// labelChoice keeps the value of the most preferred of several label names
// that mean the same thing.
type labelChoice struct {
	value string
	rank  int // position in the preference list + 1; 0 when unset
}

func (c *labelChoice) offer(name, value string, preferred []string) {
	for i, p := range preferred {
		if name == p && (c.rank == 0 || i+1 < c.rank) {
			c.value, c.rank = value, i+1
			return
		}
	}
}

// fillIdentity completes a sample's GPU with what a later sample of the
// same GPU knows (labels are the same on every sample in practice).
func fillIdentity(dst *model.GPU, src model.GPU) {
	dst.PCIBusID = cmp.Or(dst.PCIBusID, src.PCIBusID)
	dst.Device = cmp.Or(dst.Device, src.Device)
	dst.Model = cmp.Or(dst.Model, src.Model)
	dst.DriverVersion = cmp.Or(dst.DriverVersion, src.DriverVersion)
	if dst.MIG != nil && src.MIG != nil {
		dst.MIG.Profile = cmp.Or(dst.MIG.Profile, src.MIG.Profile)
	}
}

func hasField(values []model.Value, id model.FieldID) bool {
	for _, v := range values {
		if v.Field == id {
			return true
		}
	}
	return false
}

// compareSamples orders samples by GPU index, whole GPU before its MIG
// instances, MIG ids, UUID, then owner.
func compareSamples(a, b model.GPUSample) int {
	if c := cmp.Compare(a.GPU.Index, b.GPU.Index); c != 0 {
		return c
	}
	if (a.GPU.MIG == nil) != (b.GPU.MIG == nil) {
		if a.GPU.MIG == nil {
			return -1
		}
		return 1
	}
	if a.GPU.MIG != nil {
		if c := cmp.Compare(a.GPU.MIG.GPUInstanceID, b.GPU.MIG.GPUInstanceID); c != 0 {
			return c
		}
		if c := cmp.Compare(a.GPU.MIG.ComputeInstanceID, b.GPU.MIG.ComputeInstanceID); c != 0 {
			return c
		}
	}
	return cmp.Or(
		cmp.Compare(a.GPU.UUID, b.GPU.UUID),
		cmp.Compare(a.Owner.Namespace, b.Owner.Namespace),
		cmp.Compare(a.Owner.PodName, b.Owner.PodName),
		cmp.Compare(a.Owner.Container, b.Owner.Container),
	)
}

// uncatalogued describes a DCGM field outside the catalogue from its page
// family: a counter when the page says so, a gauge otherwise.
func uncatalogued(name string, family *dto.MetricFamily) (*model.Field, bool) {
	id, ok := model.FieldIDByName(name)
	if !ok {
		return nil, false
	}
	f := &model.Field{ID: id, Name: name, Profiling: model.IsProfilingID(id), Help: family.GetHelp()}
	if family.GetType() == dto.MetricType_COUNTER {
		f.Kind = model.Counter
	}
	return f, true
}
