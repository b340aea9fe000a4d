package loadtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc/<pid>/stat on
// every architecture Go supports.
const clockTicks = 100

// CPUTime is a process's user plus system time from /proc/<pid>/stat
// (utime and stime, fields 14 and 15).
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("loadtest: %w", err)
	}
	return parseStatCPU(b)
}

func parseStatCPU(b []byte) (time.Duration, error) {
	// comm (field 2) may hold spaces and parentheses: fields start after
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("loadtest: /proc stat: no command field")
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state): utime is field 14, stime 15.
	if len(fields) < 13 {
		return 0, errors.New("loadtest: /proc stat: too few fields")
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("loadtest: /proc stat: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// Memory is a process's resident set now and at its peak.
type Memory struct{ RSS, HWM int64 } // bytes

// MemoryOf reads VmRSS and VmHWM from /proc/<pid>/status.
func MemoryOf(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("loadtest: %w", err)
	}
	return parseStatusMemory(b)
}

func parseStatusMemory(b []byte) (Memory, error) {
	var m Memory
	var found int
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("loadtest: /proc status: %s: %q", key, val)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("loadtest: /proc status: %s: %w", key, err)
		}
		if key == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.HWM = kb << 10
		}
		found++
	}
	if found != 2 {
		return Memory{}, errors.New("loadtest: /proc status: no VmRSS or VmHWM")
	}
	return m, nil
}
