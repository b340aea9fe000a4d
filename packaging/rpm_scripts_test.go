//go:build packages

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The .rpm's scriptlets, as rpm runs them (issue 31: TestRPMs installs
// with --noscripts, into a root without a shell). Each scriptlet is read
// back from the package (rpm -qp --scripts) and run with rpm's arguments,
// %post 1 (install) and 2 (upgrade), %preun and %postun 0 (erase) and 1
// (upgrade), with systemd's commands replaced by stubs that record their
// arguments: what the packaged scripts ask of systemd on each step.
func TestRPMScriptlets(t *testing.T) {
	r := getRelease(t)
	rpm := need(t, "rpm", "rpm")
	_, err := os.Stat("/run/systemd/system")
	booted := err == nil
	for _, s := range specs {
		if s.unit == "" {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			pkg := r.rpm(s.name)
			requireArtifact(t, pkg)
			scripts := rpmScriptlets(t, rpm, pkg)
			for _, name := range []string{"postinstall", "preuninstall", "postuninstall"} {
				require.Contains(t, scripts, name, "%s has no %s scriptlet", pkg, name)
			}
			conf := strings.TrimSuffix(s.unit, ".service") + ".conf"

			calls := runScriptlet(t, scripts["postinstall"], "1")
			assert.Contains(t, calls, "systemd-sysusers "+conf, "install: the user")
			assert.NotContains(t, strings.Join(calls, "\n"), "try-restart", "install: nothing restarted")
			if booted {
				assert.Contains(t, calls, "systemctl daemon-reload")
			}

			calls = runScriptlet(t, scripts["postinstall"], "2")
			if booted {
				assert.Contains(t, calls, "systemctl try-restart "+s.unit, "upgrade: a running service restarts on the new binary")
			}

			assert.Empty(t, runScriptlet(t, scripts["preuninstall"], "1"), "upgrade: the service is not stopped")
			calls = runScriptlet(t, scripts["preuninstall"], "0")
			if booted {
				assert.Contains(t, calls, "systemctl --no-reload disable --now "+s.unit, "erase: stopped and disabled")
			} else {
				assert.Contains(t, calls, "systemctl --no-reload disable "+s.unit)
			}

			assert.Empty(t, runScriptlet(t, scripts["postuninstall"], "1"), "upgrade: nothing after the old version leaves")
			calls = runScriptlet(t, scripts["postuninstall"], "0")
			if booted {
				assert.Contains(t, calls, "systemctl daemon-reload")
			}
		})
	}
}

var scriptletHeader = regexp.MustCompile(`(?m)^(\w+) scriptlet \(using /bin/sh\):\n`)

// rpmScriptlets returns the package's scriptlets by rpm's name for them
// (postinstall, preuninstall, postuninstall).
func rpmScriptlets(t *testing.T, rpm, pkg string) map[string]string {
	t.Helper()
	out := run(t, nil, rpm, "-qp", "--scripts", pkg)
	heads := scriptletHeader.FindAllStringSubmatchIndex(out, -1)
	scripts := map[string]string{}
	for i, h := range heads {
		end := len(out)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		scripts[out[h[2]:h[3]]] = out[h[1]:end]
	}
	return scripts
}

// runScriptlet runs body as rpm does (sh, the count as $1) with stubs for
// systemd-sysusers, systemd-tmpfiles and systemctl first on PATH, and
// returns their calls, one "name args" line each.
func runScriptlet(t *testing.T, body, arg string) []string {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	for _, name := range []string{"systemd-sysusers", "systemd-tmpfiles", "systemctl"} {
		stub := "#!/bin/sh\necho \"" + name + " $*\" >> " + log + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(stub), 0o755))
	}
	cmd := exec.Command("sh", "-c", body, "scriptlet", arg)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "scriptlet %s:\n%s", arg, out)
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
