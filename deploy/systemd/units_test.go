package systemd

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/deploy/internal/gomemlimit"
)

var units = []string{"otelcol-gpu-agent.service", "otelcol-gpu-gateway.service", "otelcol-gpu.service"}

// unit is a parsed unit file: section -> key -> values in order (a key may
// repeat).
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s:%d: not key=value: %q", path, n, line)
			require.NotEmpty(t, section, "%s:%d: key outside a section", path, n)
			u[section][key] = append(u[section][key], value)
		}
	}
	require.NoError(t, sc.Err())
	return u
}

func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestUnitsHardened asserts the keys the deployment relies on, in Go, on
// every machine.
func TestUnitsHardened(t *testing.T) {
	for _, name := range units {
		t.Run(name, func(t *testing.T) {
			u := parseUnit(t, name)
			for _, s := range []string{"Unit", "Service", "Install"} {
				require.Contains(t, u, s)
			}
			svc := func(key string) string { return u.get("Service", key) }
			assert.Equal(t, "strict", svc("ProtectSystem"))
			assert.Equal(t, "otelcol-gpu", svc("StateDirectory"))
			assert.Equal(t, "/var/lib/otelcol-gpu", svc("ReadWritePaths"))
			assert.Equal(t, "on-failure", svc("Restart"))
			assert.Equal(t, "65536", svc("LimitNOFILE"))
			assert.Equal(t, "yes", svc("NoNewPrivileges"))
			assert.Equal(t, "otelcol-gpu", svc("User"), "never root")
			// /usr/bin: where the packages put the binary (packaging/).
			exec := svc("ExecStart")
			if name == "otelcol-gpu-agent.service" {
				// the environment file chooses the configuration, agent.yaml by default
				assert.Equal(t, "OTELCOL_GPU_CONFIG=/etc/otelcol-gpu/agent.yaml", svc("Environment"))
				exec = strings.Replace(exec, "${OTELCOL_GPU_CONFIG}", "/etc/otelcol-gpu/agent.yaml", 1)
			}
			assert.True(t, strings.HasPrefix(exec, "/usr/bin/"+strings.TrimSuffix(name, ".service")+" --config=/etc/otelcol-gpu/"), svc("ExecStart"))
			assert.Equal(t, "/bin/kill -HUP $MAINPID", svc("ExecReload"), "the collector reloads its configuration on SIGHUP")
			// Extra --config fragments from the environment file, zero or more words.
			assert.True(t, strings.HasSuffix(svc("ExecStart"), " $OTELCOL_GPU_EXTRA_ARGS"), svc("ExecStart"))
			assert.Equal(t, "multi-user.target", u.get("Install", "WantedBy"))
			if name != "otelcol-gpu-gateway.service" {
				// kmsg needs CAP_SYSLOG under dmesg_restrict, nothing else does.
				assert.Equal(t, "CAP_SYSLOG", svc("AmbientCapabilities"))
				assert.Equal(t, "CAP_SYSLOG", svc("CapabilityBoundingSet"))
				assert.Equal(t, "/dev/kmsg r", svc("DeviceAllow"))
				env := map[string]string{"otelcol-gpu-agent.service": "agent.env", "otelcol-gpu.service": "otelcol-gpu.env"}[name]
				assert.Equal(t, "-/etc/otelcol-gpu/"+env, svc("EnvironmentFile"))
			} else {
				assert.Empty(t, svc("AmbientCapabilities"), "the gateway needs no capability")
				assert.Contains(t, u["Service"], "CapabilityBoundingSet")
				assert.Empty(t, svc("CapabilityBoundingSet"))
				assert.Equal(t, "-/etc/otelcol-gpu/gateway.env", svc("EnvironmentFile"))
			}
		})
	}
}

// The GPU drop-in (GPU_SOURCE=nvml, DCGM_MODE=embedded) opens the NVIDIA
// device groups and nothing else.
func TestGPUDevicesDropIn(t *testing.T) {
	u := parseUnit(t, "gpu-devices.conf")
	assert.Equal(t, []string{"char-nvidia-frontend rw", "char-nvidia-caps r", "char-nvidia-uvm rw"}, u["Service"]["DeviceAllow"])
	assert.Len(t, u["Service"], 1, "only DeviceAllow")
	assert.Len(t, u, 1, "only [Service]")
}

// TestGoRuntimeFitsMemoryMax: each unit's MemoryMax is the cgroup limit the
// memory_limiter of its shipped config reads, and the GOMEMLIMIT of its
// environment file sits below the limiter's soft limit.
func TestGoRuntimeFitsMemoryMax(t *testing.T) {
	for component, unitFile := range map[string]string{"agent": "otelcol-gpu-agent.service", "gateway": "otelcol-gpu-gateway.service",
		"otelcol-gpu": "otelcol-gpu.service"} {
		t.Run(component, func(t *testing.T) {
			u := parseUnit(t, unitFile)
			memoryMax, err := gomemlimit.ParseSystemd(u.get("Service", "MemoryMax"))
			require.NoError(t, err)

			env := readEnvFile(t, component+".env")
			goMemLimit, err := gomemlimit.Parse(env["GOMEMLIMIT"])
			require.NoError(t, err)

			config, err := os.ReadFile(filepath.Join("..", "..", "distributions", component, "config.yaml"))
			require.NoError(t, err)
			assert.NoError(t, gomemlimit.CheckConfig(goMemLimit, memoryMax, config))
		})
	}
}

// readEnvFile reads an EnvironmentFile's KEY=value lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	env := map[string]string{}
	for n, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s:%d: not KEY=value: %q", path, n+1, line)
		env[key] = value
	}
	return env
}

// TestSystemdAnalyzeVerify runs systemd-analyze verify where it exists
// (copies whose ExecStart points at stand-in executables, since verify
// checks that the binary exists), and fails on any complaint, warnings
// included: an unknown or misspelt key is only a warning to systemd. Where
// systemd-analyze is missing, TestUnitsHardened's parse is the check.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		// No systemd here: the Go parse must still find every unit well
		// formed with the keys verify would read.
		for _, name := range units {
			u := parseUnit(t, name)
			assert.NotEmpty(t, u.get("Service", "ExecStart"), name)
			assert.NotEmpty(t, u.get("Unit", "Description"), name)
		}
		return
	}
	dir := t.TempDir()
	var paths []string
	for _, name := range units {
		bin := filepath.Join(dir, strings.TrimSuffix(name, ".service"))
		require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		b = bytes.ReplaceAll(b, []byte("/usr/bin/"), []byte(dir+"/"))
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b, 0o644))
		paths = append(paths, path)
	}
	// the agent's unit with the GPU drop-in's lines, as systemd merges them
	agent, err := os.ReadFile(filepath.Join(dir, "otelcol-gpu-agent.service"))
	require.NoError(t, err)
	dropIn, err := os.ReadFile("gpu-devices.conf")
	require.NoError(t, err)
	withGPUs := filepath.Join(dir, "otelcol-gpu-agent-gpus.service")
	require.NoError(t, os.WriteFile(withGPUs, append(append(agent, '\n'), dropIn...), 0o644))
	paths = append(paths, withGPUs)
	cmd := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify: %s", out)
	for _, line := range strings.Split(string(out), "\n") {
		for _, name := range append(units, "otelcol-gpu-agent-gpus.service") {
			assert.NotContains(t, line, name, "systemd-analyze verify complains")
		}
	}
}
