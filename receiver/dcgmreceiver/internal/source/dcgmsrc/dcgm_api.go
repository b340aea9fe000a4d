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
	g, err := dcgm.CreateGroup(name)
	if err != nil {
		return 0, wrapErr(err)
	}
	for _, gpu := range gpus {
		if err := dcgm.AddToGroup(g, gpu); err != nil {
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
