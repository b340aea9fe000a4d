//go:build !cgo

package dcgmsrc

import (
	"errors"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// errNoCgo is what every call returns in a build without cgo: go-dcgm needs
// it, so such a build has no DCGM source (the nvml and exporter sources
// still work).
var errNoCgo = errors.New("built without cgo (CGO_ENABLED=0): DCGM is unavailable")

// noCgoAPI fails Init, so Connection never lets another call through.
type noCgoAPI struct{}

func newDCGMAPI() api { return noCgoAPI{} }

func (noCgoAPI) Init(Mode, string, bool) (func(), error) { return nil, errNoCgo }
func (noCgoAPI) SupportedDevices() ([]uint, error)       { return nil, errNoCgo }
func (noCgoAPI) DeviceInfo(uint) (deviceInfo, error)     { return deviceInfo{}, errNoCgo }
func (noCgoAPI) SupportedMetricGroups(uint) ([]metricGroup, error) {
	return nil, errNoCgo
}
func (noCgoAPI) CreateFieldGroup(string, []model.FieldID) (handle, error) { return 0, errNoCgo }
func (noCgoAPI) DestroyFieldGroup(handle) error                           { return errNoCgo }
func (noCgoAPI) CreateGPUGroup(string, []uint) (handle, error)            { return 0, errNoCgo }
func (noCgoAPI) DestroyGPUGroup(handle) error                             { return errNoCgo }
func (noCgoAPI) Watch(handle, handle, time.Duration, time.Duration, int) error {
	return errNoCgo
}
func (noCgoAPI) Unwatch(handle, handle) error { return errNoCgo }
func (noCgoAPI) LatestValues(uint, []model.FieldID) ([]fieldValue, error) {
	return nil, errNoCgo
}
func (noCgoAPI) ValuesSince(handle, handle, time.Time) ([]fieldValue, time.Time, error) {
	return nil, time.Time{}, errNoCgo
}
func (noCgoAPI) MIGHierarchy() ([]gpuInstance, error) { return nil, errNoCgo }
func (noCgoAPI) CreateGPUInstanceGroup(string, []uint) (handle, error) {
	return 0, errNoCgo
}
func (noCgoAPI) GPUInstanceValues([]uint, []model.FieldID) ([]fieldValue, error) {
	return nil, errNoCgo
}
func (noCgoAPI) NVSwitches() ([]uint, error) { return nil, errNoCgo }
func (noCgoAPI) CreateHealthGroup(string, []uint, []uint) (handle, error) {
	return 0, errNoCgo
}
func (noCgoAPI) HealthSet(handle, healthSystems) error { return errNoCgo }
func (noCgoAPI) HealthCheck(handle) ([]healthIncident, error) {
	return nil, errNoCgo
}
