package nvmlsrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// inventory is what Start learns about the node.
type inventory struct {
	driverVersion string
	devices       []*device
	syms          *symbols
}

func (inv inventory) migCount() int {
	n := 0
	for _, d := range inv.devices {
		n += len(d.migs)
	}
	return n
}

// enumerate lists the GPUs with their identity, MIG devices and NVLink
// links. A GPU whose identity calls hang is kept with what is known (its
// index), so Collect reports it Unresponsive instead of forgetting it.
func (s *Source) enumerate(ctx context.Context) (inventory, error) {
	inv := inventory{syms: newSymbols(s.lib)}
	var (
		count int
		ret   nvml.Return
	)
	if err := s.guard.Do(ctx, keyInit, s.callTimeout, func() error {
		count, ret = s.lib.DeviceGetCount()
		return nil
	}); err != nil {
		return inv, fmt.Errorf("dcgmreceiver: nvml: counting GPUs: %w", err)
	}
	if ret != nvml.SUCCESS {
		return inv, fmt.Errorf("dcgmreceiver: nvml: counting GPUs: %w", ret)
	}
	var version string
	if err := s.guard.Do(ctx, keyInit, s.callTimeout, func() error {
		version, ret = s.lib.SystemGetDriverVersion()
		return nil
	}); err != nil {
		return inv, fmt.Errorf("dcgmreceiver: nvml: reading the driver version: %w", err)
	}
	if ret == nvml.SUCCESS {
		inv.driverVersion = version
	} else {
		s.logger.Warn("NVML does not give the driver version", zap.Error(ret))
	}

	for i := 0; i < count; i++ {
		var handle nvml.Device
		if err := s.guard.Do(ctx, keyInit, s.callTimeout, func() error {
			handle, ret = s.lib.DeviceGetHandleByIndex(i)
			return nil
		}); err != nil {
			return inv, fmt.Errorf("dcgmreceiver: nvml: getting GPU %d: %w", i, err)
		}
		if ret != nvml.SUCCESS || handle == nil {
			// A GPU NVML cannot open (lost, or not permitted): nothing to
			// read from it, the others still count.
			s.logger.Warn("NVML cannot open a GPU; it is left out", zap.Int("gpu", i), zap.Error(returnError(ret)))
			continue
		}
		d := s.describe(ctx, inv, i, handle)
		if err := ctx.Err(); err != nil {
			return inv, fmt.Errorf("dcgmreceiver: nvml: enumerating GPUs: %w", err)
		}
		inv.devices = append(inv.devices, d)
	}
	return inv, nil
}

// describe reads one GPU's identity, MIG devices and NVLink links.
func (s *Source) describe(ctx context.Context, inv inventory, index int, handle nvml.Device) *device {
	d := &device{
		gpu:    model.GPU{Index: index, DriverVersion: inv.driverVersion},
		handle: handle,
		key:    "nvml/gpu" + strconv.Itoa(index),
	}
	c := &caller{ctx: ctx, guard: s.guard, key: d.key, timeout: s.callTimeout, logger: s.logger, syms: inv.syms}

	if uuid, ok := call(c, "GetUUID", handle.GetUUID); ok {
		d.gpu.UUID = uuid
	}
	if name, ok := call(c, "GetName", handle.GetName); ok {
		d.gpu.Model = name
	}
	if pci, ok := call(c, "GetPciInfo", handle.GetPciInfo); ok {
		d.gpu.PCIBusID = busID(pci)
	}
	if minor, ok := call(c, "GetMinorNumber", handle.GetMinorNumber); ok {
		d.gpu.Device = "nvidia" + strconv.Itoa(minor)
	}
	d.nvlinks = s.nvlinks(c, handle)
	d.migs = s.migDevices(c, d)
	if c.failed != nil {
		s.logger.Warn("NVML calls for a GPU did not return at start; it is reported unresponsive",
			zap.Int("gpu", index), zap.String("uuid", d.gpu.UUID), zap.Error(c.failed))
	}
	return d
}

// nvlinks returns the NVLink link indexes NVML knows on the GPU: links
// are numbered from 0, and the first index NVML rejects ends the list.
func (s *Source) nvlinks(c *caller, handle nvml.Device) []int {
	var links []int
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		if _, ok := call(c, "GetNvLinkState", func() (nvml.EnableState, nvml.Return) {
			return handle.GetNvLinkState(link)
		}); !ok {
			break
		}
		links = append(links, link)
	}
	return links
}

// migDevices lists the MIG devices of a GPU whose MIG mode is on.
func (s *Source) migDevices(c *caller, d *device) []migDevice {
	type migMode struct{ current, pending int }
	mode, ok := call(c, "GetMigMode", func() (migMode, nvml.Return) {
		current, pending, ret := d.handle.GetMigMode()
		return migMode{current, pending}, ret
	})
	if !ok || mode.current != nvml.DEVICE_MIG_ENABLE {
		return nil
	}
	maxCount, ok := call(c, "GetMaxMigDeviceCount", d.handle.GetMaxMigDeviceCount)
	if !ok {
		return nil
	}
	var migs []migDevice
	for i := 0; i < maxCount; i++ {
		handle, ok := call(c, "GetMigDeviceHandleByIndex", func() (nvml.Device, nvml.Return) {
			return d.handle.GetMigDeviceHandleByIndex(i)
		})
		if !ok || handle == nil {
			continue // an empty slot
		}
		gpu := d.gpu // MIG devices carry their parent's identity, as in dcgm-exporter
		mig := &model.MIGInstance{GPUInstanceID: -1, ComputeInstanceID: -1}
		if id, ok := call(c, "GetGpuInstanceId", handle.GetGpuInstanceId); ok {
			mig.GPUInstanceID = id
		}
		if id, ok := call(c, "GetComputeInstanceId", handle.GetComputeInstanceId); ok {
			mig.ComputeInstanceID = id
		}
		if name, ok := call(c, "GetName", handle.GetName); ok {
			mig.Profile = migProfile(name)
		}
		gpu.MIG = mig
		migs = append(migs, migDevice{gpu: gpu, handle: handle})
	}
	return migs
}

// migProfile returns the profile of a MIG device from its NVML name, e.g.
// "1g.10gb" from "NVIDIA H100 80GB HBM3 MIG 1g.10gb"; "" if there is none.
func migProfile(name string) string {
	const marker = " MIG "
	i := strings.LastIndex(name, marker)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(name[i+len(marker):])
}

// busID returns a GPU's PCI bus id in NVML's long form.
func busID(pci nvml.PciInfo) string {
	if id := cString(pci.BusId[:]); id != "" {
		return normalizeBusID(id)
	}
	if id := cString(pci.BusIdLegacy[:]); id != "" {
		return normalizeBusID(id)
	}
	if pci.Domain == 0 && pci.Bus == 0 && pci.Device == 0 {
		return "" // 0000:00:00.0 is the host bridge, never a GPU: NVML did not say
	}
	return fmt.Sprintf("%08X:%02X:%02X.0", pci.Domain, pci.Bus, pci.Device)
}

// normalizeBusID writes a PCI address in NVML's long form: an 8-digit
// domain and upper-case hex, e.g. 0000:9b:00.0 -> 00000000:9B:00.0, the
// form dcgm-exporter's pci_bus_id label uses. A string that is not a PCI
// address comes back unchanged.
func normalizeBusID(id string) string {
	rest := id
	domain := "0"
	if strings.Count(rest, ":") == 2 {
		domain, rest, _ = strings.Cut(rest, ":")
	}
	bus, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return id
	}
	dev, fn, ok := strings.Cut(rest, ".")
	if !ok {
		return id
	}
	d, err1 := strconv.ParseUint(domain, 16, 32)
	b, err2 := strconv.ParseUint(bus, 16, 8)
	v, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 16, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || v > 0x1f || f > 7 {
		return id
	}
	return fmt.Sprintf("%08X:%02X:%02X.%X", d, b, v, f)
}

// cString converts a NUL-terminated C char array to a string.
func cString(chars []int8) string {
	buf := make([]byte, 0, len(chars))
	for _, c := range chars {
		if c == 0 {
			break
		}
		buf = append(buf, byte(c))
	}
	return string(buf)
}
