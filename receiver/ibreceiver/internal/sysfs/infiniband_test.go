package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	procfsRoot       = "../../testdata/procfs-sys"
	nodeExporterRoot = "../../testdata/node_exporter-sys"
)

func counterMap(cs []Counter) map[string]Counter {
	m := make(map[string]Counter, len(cs))
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func TestDeviceNames(t *testing.T) {
	names, err := NewReader(procfsRoot).DeviceNames()
	require.NoError(t, err)
	assert.Equal(t, []string{"hfi1_0", "mlx4_0", "mlx5_0"}, names)

	names, err = NewReader(nodeExporterRoot).DeviceNames()
	require.NoError(t, err)
	assert.Equal(t, []string{"i40iw0", "mlx4_0"}, names)

	_, err = NewReader(t.TempDir()).DeviceNames()
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestClassPath(t *testing.T) {
	assert.Equal(t, "/sys/class/infiniband", NewReader("/sys").ClassPath())
	assert.Equal(t, "/sys/class/infiniband", NewReader("/sys/").ClassPath())
}

func TestReadDeviceProcfsMLX5(t *testing.T) {
	r := NewReader(procfsRoot)
	var d Device
	require.NoError(t, r.ReadDevice("mlx5_0", ReadOptions{AllHWCounters: true}, &d))
	assert.Equal(t, "mlx5_0", d.Name)
	assert.Equal(t, Text{Value: "MT4118", Present: true}, d.HCAType)
	assert.Equal(t, Text{Value: "SM_2001000001034", Present: true}, d.BoardID)
	assert.Equal(t, Text{Value: "14.28.2006", Present: true}, d.FWVer)
	// Upstream fixture quirk kept byte for byte.
	assert.Equal(t, Text{Value: "0a7f:bc12:45ef:d23bEOF", Present: true}, d.NodeGUID)
	assert.Empty(t, d.Errs)
	require.Len(t, d.Ports, 1)
	p := d.Ports[0]
	assert.Equal(t, "1", p.Name)
	assert.Equal(t, State{Code: 4, Text: "ACTIVE", Present: true}, p.State)
	// Upstream quirk: phys_state reads "4: ACTIVE".
	assert.Equal(t, State{Code: 4, Text: "ACTIVE", Present: true}, p.PhysState)
	assert.Equal(t, Rate{BytesPerSecond: 3125000000, Present: true}, p.Rate)
	assert.Equal(t, Text{Value: "InfiniBand", Present: true}, p.LinkLayer)

	cm := counterMap(p.Counters)
	assert.Len(t, p.Counters, len(PortCounterNames))
	assert.Equal(t, uint64(2880761508848), cm[PortXmitData].Value)
	assert.Equal(t, uint64(18126345378), cm[PortRcvData].Value)
	assert.Equal(t, uint64(10907922116), cm[PortXmitPackets].Value)
	assert.NotContains(t, cm, "unicast_xmit_packets", "only known counters are read")
	assert.Empty(t, p.ExtCounters)

	hw := counterMap(p.HWCounters)
	assert.Len(t, p.HWCounters, 24, "every file but lifespan")
	assert.NotContains(t, counterMap(p.HWCounters), HWCounterLifespan)
	assert.Equal(t, uint64(3481), hw["req_cqe_error"].Value)
	assert.Equal(t, uint64(175528982), hw["rx_read_requests"].Value)
	for _, c := range p.HWCounters {
		assert.NoError(t, c.Err, c.Name)
	}
}

func TestReadDeviceHWCounterAllowList(t *testing.T) {
	r := NewReader(procfsRoot)
	var d Device
	require.NoError(t, r.ReadDevice("mlx5_0", ReadOptions{HWCounters: []string{"out_of_sequence", "np_cnp_sent", "req_cqe_error"}}, &d))
	hw := d.Ports[0].HWCounters
	require.Len(t, hw, 2, "np_cnp_sent does not exist in the fixture and is skipped")
	assert.Equal(t, Counter{Name: "out_of_sequence", Value: 1}, hw[0])
	assert.Equal(t, Counter{Name: "req_cqe_error", Value: 3481}, hw[1])

	// Device without hw_counters.
	require.NoError(t, r.ReadDevice("mlx4_0", ReadOptions{AllHWCounters: true}, &d))
	require.Len(t, d.Ports, 2)
	assert.Empty(t, d.Ports[0].HWCounters)
	assert.Empty(t, d.Ports[0].Errs)
}

func TestReadDeviceNodeExporter(t *testing.T) {
	r := NewReader(nodeExporterRoot)
	var d Device
	require.NoError(t, r.ReadDevice("i40iw0", ReadOptions{}, &d))
	require.Len(t, d.Ports, 1)
	p := d.Ports[0]
	assert.Equal(t, Rate{BytesPerSecond: 1250000000, Present: true}, p.Rate)
	require.Len(t, p.Counters, len(PortCounterNames))
	for _, c := range p.Counters {
		require.ErrorIs(t, c.Err, ErrNotAvailable, c.Name)
		assert.Contains(t, c.Err.Error(), "i40iw0/ports/1/counters/"+c.Name)
	}
	assert.False(t, d.NodeGUID.Present)
	assert.NoError(t, d.NodeGUID.Err)

	require.NoError(t, r.ReadDevice("mlx4_0", ReadOptions{}, &d))
	require.Len(t, d.Ports, 2)
	p1, p2 := d.Ports[0], d.Ports[1]
	assert.Equal(t, "1", p1.Name)
	assert.Equal(t, "2", p2.Name)
	ext := counterMap(p1.ExtCounters)
	assert.Len(t, ext, 4)
	assert.Equal(t, uint64(3733440), ext["port_xmit_data_64"].Value)
	assert.Equal(t, uint64(0), ext["port_xmit_packets_64"].Value)
	assert.Equal(t, uint64(4294967295), counterMap(p1.Counters)[PortXmitWait].Value)
	c2 := counterMap(p2.Counters)
	assert.NotContains(t, c2, PortXmitPackets)
	assert.Contains(t, c2, PortXmitData)
	assert.Len(t, p2.Counters, 4) // port_xmit_data, port_rcv_data, link_downed, link_error_recovery
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

func TestReadDeviceGarbageAndReuse(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "class/infiniband/mlx5_9")
	writeFile(t, filepath.Join(dev, "hca_type"), "MT4123\n")
	writeFile(t, filepath.Join(dev, "ports/10/state"), "garbage\n")
	writeFile(t, filepath.Join(dev, "ports/10/rate"), "")
	writeFile(t, filepath.Join(dev, "ports/2/counters/port_xmit_data"), "12ab\n")
	writeFile(t, filepath.Join(dev, "ports/2/counters/port_rcv_data"), "")
	writeFile(t, filepath.Join(dev, "ports/2/counters/symbol_error"), "18446744073709551616\n")
	writeFile(t, filepath.Join(dev, "ports/2/counters/link_downed"), strings.Repeat("1", 5000))
	writeFile(t, filepath.Join(dev, "ports/2/counters_ext/port_xmit_data_64"), "77\n")
	writeFile(t, filepath.Join(dev, "ports/2/hw_counters/out_of_buffer"), "3\n")

	r := NewReader(root)
	var d Device
	require.NoError(t, r.ReadDevice("mlx5_9", ReadOptions{AllHWCounters: true}, &d))
	require.Len(t, d.Ports, 2)
	assert.Equal(t, "2", d.Ports[0].Name, "ports sort numerically")
	assert.Equal(t, "10", d.Ports[1].Name)

	p10 := d.Ports[1]
	require.ErrorIs(t, p10.State.Err, ErrSyntax)
	require.ErrorIs(t, p10.Rate.Err, ErrEmpty)
	assert.False(t, p10.PhysState.Present)
	assert.NoError(t, p10.PhysState.Err)

	cm := counterMap(d.Ports[0].Counters)
	require.ErrorIs(t, cm[PortXmitData].Err, ErrSyntax)
	require.ErrorIs(t, cm[PortRcvData].Err, ErrEmpty)
	require.ErrorIs(t, cm["symbol_error"].Err, ErrRange)
	require.ErrorIs(t, cm["link_downed"].Err, ErrTooLong)
	assert.Equal(t, []Counter{{Name: "port_xmit_data_64", Value: 77}}, d.Ports[0].ExtCounters)
	assert.Equal(t, []Counter{{Name: "out_of_buffer", Value: 3}}, d.Ports[0].HWCounters)

	// Reuse: the device loses a port and a file; nothing stale survives.
	require.NoError(t, os.RemoveAll(filepath.Join(dev, "ports/10")))
	require.NoError(t, os.Remove(filepath.Join(dev, "hca_type")))
	writeFile(t, filepath.Join(dev, "ports/2/counters/port_xmit_data"), "5\n")
	require.NoError(t, r.ReadDevice("mlx5_9", ReadOptions{AllHWCounters: true}, &d))
	require.Len(t, d.Ports, 1)
	assert.False(t, d.HCAType.Present)
	assert.Empty(t, d.HCAType.Value)
	cm = counterMap(d.Ports[0].Counters)
	assert.Equal(t, Counter{Name: PortXmitData, Value: 5}, cm[PortXmitData])
}

func TestReadDeviceErrors(t *testing.T) {
	root := t.TempDir()
	r := NewReader(root)
	var d Device
	err := r.ReadDevice("nope", ReadOptions{}, &d)
	require.ErrorIs(t, err, fs.ErrNotExist)

	writeFile(t, filepath.Join(root, "class/infiniband/file"), "x")
	err = r.ReadDevice("file", ReadOptions{}, &d)
	require.ErrorIs(t, err, ErrNotDir)

	// "ports" is a file: recorded as a listing error, no ports.
	writeFile(t, filepath.Join(root, "class/infiniband/odd/ports"), "x")
	require.NoError(t, r.ReadDevice("odd", ReadOptions{}, &d))
	assert.Empty(t, d.Ports)
	require.Len(t, d.Errs, 1)

	// A device without ports directory has no ports and no errors.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "class/infiniband/bare"), 0o755))
	require.NoError(t, r.ReadDevice("bare", ReadOptions{}, &d))
	assert.Empty(t, d.Ports)
	assert.Empty(t, d.Errs)
}

func TestReadFileUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can read files without permission")
	}
	root := t.TempDir()
	p := filepath.Join(root, "class/infiniband/d/ports/1/counters/symbol_error")
	writeFile(t, p, "1\n")
	require.NoError(t, os.Chmod(p, 0))
	var d Device
	require.NoError(t, NewReader(root).ReadDevice("d", ReadOptions{}, &d))
	require.ErrorIs(t, d.Ports[0].Counters[0].Err, fs.ErrPermission)
}

func TestComparePortNames(t *testing.T) {
	assert.Equal(t, -1, comparePortNames("2", "10"))
	assert.Equal(t, 1, comparePortNames("10", "2"))
	assert.Equal(t, 0, comparePortNames("1", "1"))
	assert.Equal(t, -1, comparePortNames("a", "b"))
	assert.Equal(t, 1, comparePortNames("b", "ab"))
	assert.False(t, errors.Is(nil, ErrTooLong))
}

func TestReadDeviceSkipsNonDirectoryPorts(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "class/infiniband/d/ports/1/state"), "4: ACTIVE\n")
	writeFile(t, filepath.Join(root, "class/infiniband/d/ports/2"), "not a port")
	var d Device
	require.NoError(t, NewReader(root).ReadDevice("d", ReadOptions{}, &d))
	require.Len(t, d.Ports, 1)
	assert.Equal(t, "1", d.Ports[0].Name)
	assert.Equal(t, State{Code: 4, Text: "ACTIVE", Present: true}, d.Ports[0].State)
}
