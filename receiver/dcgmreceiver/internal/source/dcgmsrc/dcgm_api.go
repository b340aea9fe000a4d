//go:build cgo

package dcgmsrc

import (
	"errors"
	"time"

	"github.com/NVIDIA/go-dcgm/pkg/dcgm"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// dcgmAPI is the production api: each method is one go-dcgm call. It holds
// no state; go-dcgm keeps its handle in package state, which is why the
// process has one Connection (see Connections).
type dcgmAPI struct{}

func newDCGMAPI() api { return dcgmAPI{} }

// wrapErr keeps the DCGM return code of go-dcgm's *dcgm.Error; the other
// errors go-dcgm returns carry DCGM's message only (see statusOf).
func wrapErr(err error) error {
	var de *dcgm.Error
	if errors.As(err, &de) {
		return &statusError{Code: int(de.Code), Msg: de.Error()}
	}
	return err
}

func (dcgmAPI) Init(mode Mode, address string, isUnixSocket bool) (func(), error) {
	if mode == ModeEmbedded {
		cleanup, err := dcgm.Init(dcgm.Embedded)
		return cleanup, wrapErr(err)
	}
	socket := "0"
	if isUnixSocket {
		socket = "1"
	}
	cleanup, err := dcgm.Init(dcgm.Standalone, address, socket)
	return cleanup, wrapErr(err)
}

func (dcgmAPI) SupportedDevices() ([]uint, error) {
	ids, err := dcgm.GetSupportedDevices()
	return ids, wrapErr(err)
}

func (dcgmAPI) DeviceInfo(gpu uint) (deviceInfo, error) {
	d, err := dcgm.GetDeviceInfo(gpu)
	if err != nil {
		return deviceInfo{}, wrapErr(err)
	}
	return deviceInfo{
		UUID:          d.UUID,
		Model:         d.Identifiers.Model,
		PCIBusID:      d.PCI.BusID,
		DriverVersion: d.Identifiers.DriverVersion,
	}, nil
}

func (dcgmAPI) SupportedMetricGroups(gpu uint) ([]metricGroup, error) {
	groups, err := dcgm.GetSupportedMetricGroups(gpu)
	if err != nil {
		return nil, wrapErr(err)
	}
	out := make([]metricGroup, len(groups))
	for i, g := range groups {
		out[i] = metricGroup{Major: g.Major, Minor: g.Minor, Fields: make([]model.FieldID, len(g.FieldIds))}
		for j, f := range g.FieldIds {
			out[i].Fields[j] = model.FieldID(f)
		}
	}
	return out, nil
}

func toShorts(fields []model.FieldID) []dcgm.Short {
	out := make([]dcgm.Short, len(fields))
	for i, f := range fields {
		out[i] = dcgm.Short(f)
	}
	return out
}

func fieldHandle(h handle) dcgm.FieldHandle {
	var fh dcgm.FieldHandle
	fh.SetHandle(uintptr(h))
	return fh
}

func groupHandle(h handle) dcgm.GroupHandle {
	var gh dcgm.GroupHandle
	gh.SetHandle(uintptr(h))
	return gh
}

func (dcgmAPI) CreateFieldGroup(name string, fields []model.FieldID) (handle, error) {
	if len(fields) == 0 {
		return 0, errors.New("empty field group") // go-dcgm would index an empty slice
	}
	fh, err := dcgm.FieldGroupCreate(name, toShorts(fields))
	if err != nil {
		return 0, wrapErr(err)
	}
	return handle(fh.GetHandle()), nil
}

func (dcgmAPI) DestroyFieldGroup(fg handle) error {
	return wrapErr(dcgm.FieldGroupDestroy(fieldHandle(fg)))
}

func (dcgmAPI) CreateGPUGroup(name string, gpus []uint) (handle, error) {
	return createGroup(name, gpus, dcgm.AddToGroup)
}

func (dcgmAPI) CreateGPUInstanceGroup(name string, gpuInstances []uint) (handle, error) {
	return createGroup(name, gpuInstances, func(g dcgm.GroupHandle, id uint) error {
		return dcgm.AddEntityToGroup(g, dcgm.FE_GPU_I, id)
	})
}

// createGroup makes a group of the entities add puts in, removing it again
// if one cannot be added.
func createGroup(name string, ids []uint, add func(dcgm.GroupHandle, uint) error) (handle, error) {
	g, err := dcgm.CreateGroup(name)
	if err != nil {
		return 0, wrapErr(err)
	}
	for _, id := range ids {
		if err := add(g, id); err != nil {
			_ = dcgm.DestroyGroup(g)
			return 0, wrapErr(err)
		}
	}
	return handle(g.GetHandle()), nil
}

func (dcgmAPI) DestroyGPUGroup(g handle) error {
	return wrapErr(dcgm.DestroyGroup(groupHandle(g)))
}

func (dcgmAPI) Watch(fg, g handle, updateEvery, keepAge time.Duration, keepSamples int) error {
	return wrapErr(dcgm.WatchFieldsWithGroupEx(fieldHandle(fg), groupHandle(g),
		updateEvery.Microseconds(), keepAge.Seconds(), int32(keepSamples)))
}

func (dcgmAPI) Unwatch(fg, g handle) error {
	return wrapErr(dcgm.UnwatchFields(fieldHandle(fg), groupHandle(g)))
}

func (dcgmAPI) LatestValues(gpu uint, fields []model.FieldID) ([]fieldValue, error) {
	if len(fields) == 0 {
		return nil, nil // go-dcgm would index an empty slice
	}
	raw, err := dcgm.EntityGetLatestValues(dcgm.FE_GPU, gpu, toShorts(fields))
	if err != nil {
		return nil, wrapErr(err)
	}
	out := make([]fieldValue, len(raw))
	for i, v := range raw {
		out[i] = fieldValue{GPU: gpu, Field: model.FieldID(v.FieldID), Type: byte(v.FieldType), Status: v.Status, TS: v.TS}
		switch v.FieldType {
		case dcgm.DCGM_FT_INT64:
			out[i].Int = v.Int64()
		case dcgm.DCGM_FT_DOUBLE:
			out[i].Float = v.Float64()
		}
	}
	return out, nil
}

func (dcgmAPI) ValuesSince(g, fg handle, since time.Time) ([]fieldValue, time.Time, error) {
	raw, next, err := dcgm.GetValuesSince(groupHandle(g), fieldHandle(fg), since)
	if err != nil {
		return nil, time.Time{}, wrapErr(err)
	}
	out := make([]fieldValue, 0, len(raw))
	for _, v := range raw {
		if v.EntityGroupId != dcgm.FE_GPU {
			continue
		}
		fv := fieldValue{GPU: v.EntityID, Field: model.FieldID(v.FieldID), Type: byte(v.FieldType), Status: v.Status, TS: v.TS}
		switch v.FieldType {
		case dcgm.DCGM_FT_INT64:
			fv.Int = v.Int64()
		case dcgm.DCGM_FT_DOUBLE:
			fv.Float = v.Float64()
		}
		out = append(out, fv)
	}
	return out, next, nil
}

func (dcgmAPI) MIGHierarchy() ([]gpuInstance, error) {
	h, err := dcgm.GetGPUInstanceHierarchy()
	if err != nil {
		return nil, wrapErr(err)
	}
	entries := h.EntityList[:min(h.Count, uint(len(h.EntityList)))]
	var out []gpuInstance
	byEntity := map[uint]int{}
	for _, e := range entries {
		if e.Entity.EntityGroupId == dcgm.FE_GPU_I && e.Parent.EntityGroupId == dcgm.FE_GPU {
			byEntity[e.Entity.EntityId] = len(out)
			out = append(out, gpuInstance{Entity: e.Entity.EntityId, GPU: e.Parent.EntityId, InstanceID: e.Info.NvmlInstanceId})
		}
	}
	for _, e := range entries {
		if i, ok := byEntity[e.Parent.EntityId]; ok && e.Entity.EntityGroupId == dcgm.FE_GPU_CI && e.Parent.EntityGroupId == dcgm.FE_GPU_I {
			out[i].ComputeInstanceIDs = append(out[i].ComputeInstanceIDs, e.Info.NvmlComputeInstanceId)
		}
	}
	if len(out) == 0 {
		return nil, nil // go-dcgm would index an empty entity list
	}
	// A GPU instance's DCGM_FI_DEV_NAME is its profile, as dcgm-exporter
	// reads it. Without it the instances are still told apart by their
	// ids, so a failed read leaves the profiles empty.
	entities := make([]dcgm.GroupEntityPair, len(out))
	for i, gi := range out {
		entities[i] = dcgm.GroupEntityPair{EntityGroupId: dcgm.FE_GPU_I, EntityId: gi.Entity}
	}
	names, err := dcgm.EntitiesGetLatestValues(entities, []dcgm.Short{dcgm.DCGM_FI_DEV_NAME}, dcgm.DCGM_FV_FLAG_LIVE_DATA)
	if err != nil {
		return out, nil
	}
	for _, v := range names {
		i, ok := byEntity[v.EntityID]
		if !ok || v.EntityGroupId != dcgm.FE_GPU_I || v.Status != 0 || v.FieldType != dcgm.DCGM_FT_STRING {
			continue
		}
		out[i].Profile = migProfile(v.String())
	}
	return out, nil
}

func (dcgmAPI) GPUInstanceValues(gpuInstances []uint, fields []model.FieldID) ([]fieldValue, error) {
	if len(gpuInstances) == 0 || len(fields) == 0 {
		return nil, nil // go-dcgm would index an empty slice
	}
	entities := make([]dcgm.GroupEntityPair, len(gpuInstances))
	for i, id := range gpuInstances {
		entities[i] = dcgm.GroupEntityPair{EntityGroupId: dcgm.FE_GPU_I, EntityId: id}
	}
	raw, err := dcgm.EntitiesGetLatestValues(entities, toShorts(fields), 0)
	if err != nil {
		return nil, wrapErr(err)
	}
	out := make([]fieldValue, 0, len(raw))
	for _, v := range raw {
		if v.EntityGroupId != dcgm.FE_GPU_I {
			continue
		}
		fv := fieldValue{GPU: v.EntityID, Field: model.FieldID(v.FieldID), Type: byte(v.FieldType), Status: v.Status, TS: v.TS}
		switch v.FieldType {
		case dcgm.DCGM_FT_INT64:
			fv.Int = v.Int64()
		case dcgm.DCGM_FT_DOUBLE:
			fv.Float = v.Float64()
		}
		out = append(out, fv)
	}
	return out, nil
}

func (dcgmAPI) NVSwitches() ([]uint, error) {
	ids, err := dcgm.GetEntityGroupEntities(dcgm.FE_SWITCH)
	return ids, wrapErr(err)
}

func (dcgmAPI) CreateHealthGroup(name string, gpus, nvSwitches []uint) (handle, error) {
	g, err := createGroup(name, gpus, dcgm.AddToGroup)
	if err != nil {
		return 0, err
	}
	gh := groupHandle(g)
	for _, id := range nvSwitches {
		if err := dcgm.AddEntityToGroup(gh, dcgm.FE_SWITCH, id); err != nil {
			_ = dcgm.DestroyGroup(gh)
			return 0, wrapErr(err)
		}
	}
	return g, nil
}

func (dcgmAPI) HealthSet(g handle, systems healthSystems) error {
	return wrapErr(dcgm.HealthSet(groupHandle(g), dcgm.HealthSystem(systems)))
}

func (dcgmAPI) HealthCheck(g handle) ([]healthIncident, error) {
	resp, err := dcgm.HealthCheck(groupHandle(g))
	if err != nil {
		return nil, wrapErr(err)
	}
	out := make([]healthIncident, 0, len(resp.Incidents))
	for _, in := range resp.Incidents {
		var onSwitch bool
		switch in.EntityInfo.EntityGroupId {
		case dcgm.FE_GPU:
		case dcgm.FE_SWITCH:
			onSwitch = true
		default:
			continue // a GPU instance or link: the source watches whole GPUs and switches
		}
		out = append(out, healthIncident{
			System:   healthSystems(in.System),
			Result:   int(in.Health),
			Code:     int(in.Error.Code),
			Message:  in.Error.Message,
			OnSwitch: onSwitch,
			Entity:   in.EntityInfo.EntityId,
		})
	}
	return out, nil
}
