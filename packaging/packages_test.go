//go:build packages

// The packages and release artifacts make release wrote into $(DIST),
// checked with the real tools: dpkg installs each .deb into a scratch root
// (chrootless: the maintainer scripts run here with DPKG_ROOT set and must
// put the user into that root, not into this machine), rpm installs each
// .rpm into another, and in both the installed binary runs --version and
// validate on the installed configs, and systemd-analyze verifies the
// installed unit against the installed binary. Run by make package-test
// (after make release, which it depends on), which installs the Debian
// packages it needs.
package packaging

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spec is what one package must hold.
type spec struct {
	name string
	// Where the distribution's configs come from in the repository
	// (tarball), and the installed config the unit runs.
	configDir string
	config    string
	// The environment file systemd reads ("" for none).
	envFile string
	// Each is validated as the unit would run it.
	validations []validation
	conffiles   []string
	unit        string
	sysusers    string
	tmpfiles    string
	dcgm        bool
	// More binaries in /usr/bin: static tools, each also released as its
	// own tarball (ctlTarball).
	tools []string
}

// consoleToken is the console's token file in the validations: validate
// checks that the fragment names one, it does not read it.
var consoleToken = map[string]string{"OTELCOL_GPU_CONSOLE_TOKEN_FILE": "/etc/otelcol-gpu/console-token"}

// withVars is a's variables and b's.
func withVars(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// ctlName is the fault console's command line (mk/ctl.mk): in the gateway
// package and in a tarball of its own.
const ctlName = "otelcol-gpu-ctl"

var specs = []spec{
	{
		name:      "otelcol-gpu-agent",
		configDir: "distributions/agent",
		config:    "/etc/otelcol-gpu/agent.yaml",
		envFile:   "/etc/otelcol-gpu/agent.env",
		validations: []validation{
			{},
			{configs: []string{"/etc/otelcol-gpu/agent-kafka-tls-sasl.yaml"}, vars: map[string]string{"KAFKA_SASL_USERNAME": "agent", "KAFKA_SASL_PASSWORD": "secret"}},
			{configs: []string{"/etc/otelcol-gpu/agent-otlp-auth.yaml"}, vars: map[string]string{"OTLP_BEARER_TOKEN": "token"}},
			{configs: []string{"/etc/otelcol-gpu/agent-prometheus-endpoint.yaml"}},
			{configs: []string{"/etc/otelcol-gpu/agent-repair.yaml", "/etc/otelcol-gpu/agent-repair-tls.yaml"},
				vars: map[string]string{"REPAIR_TLS_CERT_FILE": "/etc/otelcol-gpu/repair-tls.crt", "REPAIR_TLS_KEY_FILE": "/etc/otelcol-gpu/repair-tls.key"}},
			// The standalone preset names its own configuration.
			{envFile: "/usr/share/otelcol-gpu/agent-standalone.env"},
			// The small-cluster example environment names its fragment.
			{envFile: "/usr/share/otelcol-gpu/agent-small-cluster.env"},
			{
				envFile: "/usr/share/otelcol-gpu/agent-small-cluster.env",
				configs: []string{"/etc/otelcol-gpu/agent-otlp-auth.yaml", "/etc/otelcol-gpu/agent-small-cluster-otlp-auth.yaml"},
				vars:    map[string]string{"OTLP_BEARER_TOKEN": "token"},
			},
		},
		conffiles: []string{
			"/etc/otelcol-gpu/agent-kafka-tls-sasl.yaml",
			"/etc/otelcol-gpu/agent-otlp-auth.yaml",
			"/etc/otelcol-gpu/agent-prometheus-endpoint.yaml",
			"/etc/otelcol-gpu/agent-repair-tls.yaml",
			"/etc/otelcol-gpu/agent-repair.yaml",
			"/etc/otelcol-gpu/agent-small-cluster-otlp-auth.yaml",
			"/etc/otelcol-gpu/agent-small-cluster.yaml",
			"/etc/otelcol-gpu/agent-standalone.yaml",
			"/etc/otelcol-gpu/agent.env",
			"/etc/otelcol-gpu/agent.yaml",
			"/etc/otelcol-gpu/slurm.env",
		},
		unit:     "otelcol-gpu-agent.service",
		sysusers: "/usr/lib/sysusers.d/otelcol-gpu-agent.conf",
		tmpfiles: "/usr/lib/tmpfiles.d/otelcol-gpu-agent.conf",
		dcgm:     true,
	},
	{
		name:      "otelcol-gpu-gateway",
		configDir: "distributions/gateway",
		config:    "/etc/otelcol-gpu/gateway.yaml",
		envFile:   "/etc/otelcol-gpu/gateway.env",
		validations: []validation{
			{},
			{configs: []string{"/etc/otelcol-gpu/gateway-kafka-tls-sasl.yaml"}, vars: map[string]string{"KAFKA_SASL_USERNAME": "gateway", "KAFKA_SASL_PASSWORD": "secret"}},
			{envFile: "/usr/share/otelcol-gpu/gateway-small-cluster.env"},
			// The fault console, merged last in each mode.
			{configs: []string{"/etc/otelcol-gpu/gateway-console.yaml"}, vars: consoleToken},
			{
				configs: []string{"/etc/otelcol-gpu/gateway-kafka-tls-sasl.yaml", "/etc/otelcol-gpu/gateway-console.yaml"},
				vars:    withVars(consoleToken, map[string]string{"KAFKA_SASL_USERNAME": "gateway", "KAFKA_SASL_PASSWORD": "secret"}),
			},
			{envFile: "/usr/share/otelcol-gpu/gateway-small-cluster.env", configs: []string{"/etc/otelcol-gpu/gateway-small-cluster-console.yaml"}, vars: consoleToken},
		},
		conffiles: []string{
			"/etc/otelcol-gpu/gateway-console.yaml",
			"/etc/otelcol-gpu/gateway-kafka-tls-sasl.yaml",
			"/etc/otelcol-gpu/gateway-small-cluster-console.yaml",
			"/etc/otelcol-gpu/gateway-small-cluster.yaml",
			"/etc/otelcol-gpu/gateway.env",
			"/etc/otelcol-gpu/gateway.yaml",
		},
		unit:     "otelcol-gpu-gateway.service",
		sysusers: "/usr/lib/sysusers.d/otelcol-gpu-gateway.conf",
		tools:    []string{ctlName},
	},
	{
		name:      "otelcol-gpu",
		configDir: "distributions/otelcol-gpu",
		config:    "/etc/otelcol-gpu/otelcol-gpu.yaml",
		validations: []validation{
			{},
			{configs: []string{"/etc/otelcol-gpu/otelcol-gpu-remote-write.yaml"}},
			{configs: []string{"/etc/otelcol-gpu/otelcol-gpu-console.yaml"}, vars: consoleToken},
			{configs: []string{"/etc/otelcol-gpu/otelcol-gpu-remote-write.yaml", "/etc/otelcol-gpu/otelcol-gpu-console.yaml"}, vars: consoleToken},
		},
		conffiles: []string{
			"/etc/otelcol-gpu/otelcol-gpu-console.yaml",
			"/etc/otelcol-gpu/otelcol-gpu-remote-write.yaml",
			"/etc/otelcol-gpu/otelcol-gpu.env",
			"/etc/otelcol-gpu/otelcol-gpu.yaml",
		},
		envFile:  "/etc/otelcol-gpu/otelcol-gpu.env",
		unit:     "otelcol-gpu.service",
		sysusers: "/usr/lib/sysusers.d/otelcol-gpu.conf",
		tmpfiles: "/usr/lib/tmpfiles.d/otelcol-gpu.conf",
		dcgm:     true,
	},
}

// validation: the installed binary validates the installed config with
// the variables of an environment file (the spec's unless envFile), its
// OTELCOL_GPU_EXTRA_ARGS as the unit expands them, then configs (more
// fragments) and vars.
type validation struct {
	envFile string
	configs []string
	vars    map[string]string
}

// The newest glibc symbol version the packages declare (libc6 (>= 2.34),
// libc.so.6(GLIBC_2.34)(64bit)).
const declaredGlibc = "2.34"

// release is what make release-version and the environment say the
// artifacts are.
type release struct {
	dist       string
	version    string // PKG_VERSION
	appVersion string // the VERSION file
	debArch    string
	rpmArch    string
	epoch      string // SOURCE_DATE_EPOCH: the commit's time
	commit     string // 12 hex digits
}

func (r release) deb(name string) string {
	return filepath.Join(r.dist, name+"_"+r.version+"-1_"+r.debArch+".deb")
}

func (r release) rpm(name string) string {
	return filepath.Join(r.dist, name+"-"+r.version+"-1."+r.rpmArch+".rpm")
}

func (r release) tarball(name string) string {
	return filepath.Join(r.dist, name+"_"+r.version+"_linux_"+r.debArch+".tar.gz")
}

func (r release) sbom(name string) string {
	return filepath.Join(r.dist, name+"_"+r.version+"_linux_"+r.debArch+".cdx.json")
}

func getRelease(t *testing.T) release {
	t.Helper()
	r := release{dist: os.Getenv("DIST"), version: os.Getenv("PKG_VERSION"), debArch: runtime.GOARCH}
	if r.dist == "" {
		r.dist = filepath.Join("..", "dist")
	}
	var err error
	r.dist, err = filepath.Abs(r.dist)
	require.NoError(t, err)
	if r.version == "" {
		r.version = strings.TrimSpace(run(t, nil, "make", "-s", "-C", "..", "release-version"))
	}
	require.NotEmpty(t, r.version)
	v, err := os.ReadFile(filepath.Join("..", "VERSION"))
	require.NoError(t, err)
	r.appVersion = strings.TrimSpace(string(v))
	r.epoch = os.Getenv("SOURCE_DATE_EPOCH")
	if r.epoch == "" {
		r.epoch = strings.TrimSpace(run(t, nil, "git", "log", "-1", "--format=%ct"))
	}
	// make package-test passes the Makefile's COMMIT (-dirty when the tree
	// had changes, which --version prints too).
	r.commit = strings.TrimSuffix(os.Getenv("COMMIT"), "-dirty")
	if r.commit == "" {
		r.commit = strings.TrimSpace(run(t, nil, "git", "rev-parse", "--short=12", "HEAD"))
	}
	r.rpmArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[r.debArch]
	require.NotEmpty(t, r.rpmArch, "no rpm architecture for GOARCH %s", r.debArch)
	return r
}

// need fails the test when a tool is missing, saying how to get it.
func need(t *testing.T, tool, debianPackage string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	require.NoError(t, err, "%s is missing: apt-get install %s (make package-test installs it)", tool, debianPackage)
	return path
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

func requireArtifact(t *testing.T, path string) {
	t.Helper()
	_, err := os.Stat(path)
	require.NoError(t, err, "%s is missing: make release (or make packages) writes it", path)
}

// newDpkgRoot makes an empty root with a dpkg database.
func newDpkgRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644))
	return root
}

// dpkgRoot runs dpkg on root. --force-script-chrootless: the maintainer
// scripts run on this machine with DPKG_ROOT=root (the root has no shell);
// --force-depends: the root's database has no libc6 or systemd.
func dpkgRoot(t *testing.T, root string, args ...string) string {
	t.Helper()
	return run(t, nil, "dpkg", append([]string{"--root=" + root, "--force-script-chrootless", "--force-depends", "--log=/dev/null"}, args...)...)
}

func TestDebs(t *testing.T) {
	r := getRelease(t)
	need(t, "dpkg", "dpkg")
	need(t, "dpkg-deb", "dpkg")
	need(t, "systemd-analyze", "systemd")
	need(t, "systemd-sysusers", "systemd")
	need(t, "systemd-tmpfiles", "systemd")
	need(t, "systemctl", "systemd")
	nfpm := nfpmBin(t)

	for _, s := range specs {
		t.Run(s.name, func(t *testing.T) {
			deb := r.deb(s.name)
			requireArtifact(t, deb)

			fields := debFields(t, deb)
			assert.Equal(t, s.name, fields["Package"])
			assert.Equal(t, r.version+"-1", fields["Version"])
			assert.Equal(t, r.debArch, fields["Architecture"])
			assert.Contains(t, fields["Depends"], "libc6 (>= "+declaredGlibc+")")
			if s.unit != "" {
				assert.Contains(t, fields["Depends"], "systemd | systemd-standalone-sysusers | systemd-sysusers", "the postinst runs systemd-sysusers")
			}
			if s.dcgm {
				assert.Equal(t, "datacenter-gpu-manager-4-core", fields["Recommends"], "libdcgm.so.4, loaded when present")
			} else {
				assert.NotContains(t, fields["Recommends"], "datacenter-gpu-manager")
			}

			assertReproducible(t, deb, buildPackage(t, nfpm, s.name, "deb", r.version, r.epoch))

			passwdBefore, err := os.ReadFile("/etc/passwd")
			require.NoError(t, err)
			root := newDpkgRoot(t)
			dpkgRoot(t, root, "-i", deb)

			passwdAfter, err := os.ReadFile("/etc/passwd")
			require.NoError(t, err)
			assert.Equal(t, string(passwdBefore), string(passwdAfter), "the postinst changed this machine's users instead of DPKG_ROOT's")
			if s.unit != "" {
				passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
				require.NoError(t, err, "the postinst created no user in DPKG_ROOT")
				assert.Regexp(t, `(?m)^otelcol-gpu:x:\d+:\d+:[^:]*:/var/lib/otelcol-gpu:/usr/sbin/nologin$`, string(passwd))
			}

			conffiles, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/info", s.name+".conffiles"))
			require.NoError(t, err, "no conffiles")
			assert.Equal(t, s.conffiles, sortedLines(string(conffiles)))

			checkInstalled(t, r, s, root)

			// An upgrade keeps an edited conffile: a newer build of the
			// same package over the edited root.
			edited := filepath.Join(root, s.conffiles[0])
			orig, err := os.ReadFile(edited)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(edited, append(orig, "\n# edited by the administrator\n"...), 0o644))
			newer := buildPackage(t, nfpm, s.name, "deb", r.version+"+upgrade", r.epoch)
			dpkgRoot(t, root, "-i", newer)
			status := run(t, nil, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f=${Version} ${Status}", s.name)
			assert.Equal(t, r.version+"+upgrade-1 install ok installed", status)
			afterUpgrade, err := os.ReadFile(edited)
			require.NoError(t, err)
			assert.Contains(t, string(afterUpgrade), "# edited by the administrator", "the upgrade replaced an edited conffile")

			// The administrator enabled the service; removal disables it
			// (the prerm, with DPKG_ROOT: systemctl --root).
			wants := filepath.Join(root, "etc/systemd/system/multi-user.target.wants", s.unit)
			if s.unit != "" {
				run(t, nil, "systemctl", "--root="+root, "enable", s.unit)
				_, err := os.Lstat(wants)
				require.NoError(t, err, "systemctl --root enable made no symlink")
			}

			// Purge removes the files and the conffiles; the user stays
			// (shared by both packages, owner of /var/lib/otelcol-gpu).
			dpkgRoot(t, root, "--purge", s.name)
			if s.unit != "" {
				_, err := os.Lstat(wants)
				assert.ErrorIs(t, err, fs.ErrNotExist, "removal left the service enabled")
			}
			for _, p := range append(append([]string{"/usr/bin/" + s.name}, s.conffiles...), toolPaths(s)...) {
				assert.NoFileExists(t, filepath.Join(root, p))
			}
			if s.unit != "" {
				assert.NoFileExists(t, filepath.Join(root, "usr/lib/systemd/system", s.unit))
				passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
				require.NoError(t, err)
				assert.Contains(t, string(passwd), "otelcol-gpu:x:")
			}
		})
	}
}

// TestDebsTogether: the three packages install side by side (no path owned
// by two of them; one user from two sysusers.d files), and removing one
// leaves the others whole.
func TestDebsTogether(t *testing.T) {
	r := getRelease(t)
	need(t, "dpkg", "dpkg")
	need(t, "systemd-sysusers", "systemd")
	root := newDpkgRoot(t)
	var debs []string
	for _, s := range specs {
		requireArtifact(t, r.deb(s.name))
		debs = append(debs, r.deb(s.name))
	}
	dpkgRoot(t, root, append([]string{"-i"}, debs...)...)
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(passwd), "otelcol-gpu:x:"), "one user for both units")

	dpkgRoot(t, root, "--purge", "otelcol-gpu-agent")
	for _, s := range specs[1:] {
		assert.FileExists(t, filepath.Join(root, "usr/bin", s.name))
		for _, c := range append(s.conffiles, toolPaths(s)...) {
			assert.FileExists(t, filepath.Join(root, c))
		}
	}
	assert.FileExists(t, filepath.Join(root, "usr/lib/sysusers.d/otelcol-gpu-gateway.conf"))
	assert.NoFileExists(t, filepath.Join(root, "usr/bin/otelcol-gpu-agent"))
}

// debFields reads a .deb's control fields.
func debFields(t *testing.T, deb string) map[string]string {
	t.Helper()
	fields := map[string]string{}
	for _, f := range []string{"Package", "Version", "Architecture", "Depends", "Recommends"} {
		fields[f] = strings.TrimSpace(run(t, nil, "dpkg-deb", "-f", deb, f))
	}
	return fields
}

// buildPackage builds the package again with another version, as make
// packages does (nfpm from the repository root).
func buildPackage(t *testing.T, nfpm, name, packager, version, epoch string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+"."+packager)
	nfpm, err := filepath.Abs(nfpm)
	require.NoError(t, err)
	cmd := exec.Command(nfpm, "package", "--config", "packaging/"+name+".yaml", "--packager", packager, "--target", out)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PKG_VERSION="+version, "NFPM_ARCH="+runtime.GOARCH, "SOURCE_DATE_EPOCH="+epoch)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", nfpm, b)
	return out
}

func TestRPMs(t *testing.T) {
	r := getRelease(t)
	rpm := need(t, "rpm", "rpm")
	need(t, "systemd-analyze", "systemd")
	nfpm := nfpmBin(t)

	for _, s := range specs {
		t.Run(s.name, func(t *testing.T) {
			pkg := r.rpm(s.name)
			requireArtifact(t, pkg)

			assertReproducible(t, pkg, buildPackage(t, nfpm, s.name, "rpm", r.version, r.epoch))

			header := strings.Split(strings.TrimSpace(run(t, nil, rpm, "-qp", "--qf", `%{NAME}\n%{VERSION}\n%{RELEASE}\n%{ARCH}\n`, pkg)), "\n")
			assert.Equal(t, []string{s.name, r.version, "1", r.rpmArch}, header)
			requires := run(t, nil, rpm, "-qp", "--requires", pkg)
			assert.Contains(t, requires, "libc.so.6(GLIBC_"+declaredGlibc+")(64bit)")
			if s.unit != "" {
				assert.Contains(t, sortedLines(requires), "systemd")
			}
			recommends := run(t, nil, rpm, "-qp", "--recommends", pkg)
			if s.dcgm {
				assert.Equal(t, "datacenter-gpu-manager-4-core", strings.TrimSpace(recommends))
			} else {
				assert.Empty(t, strings.TrimSpace(recommends))
			}

			// %config(noreplace) on exactly the conffiles: flags "c" and "n".
			var configs []string
			for _, line := range sortedLines(run(t, nil, rpm, "-qp", "--qf", `[%{FILEFLAGS:fflags} %{FILENAMES}\n]`, pkg)) {
				flags, path, ok := strings.Cut(line, " ")
				if !ok || !strings.Contains(flags, "c") {
					continue
				}
				assert.Contains(t, flags, "n", "%s is %%config without noreplace", path)
				configs = append(configs, path)
			}
			assert.Equal(t, s.conffiles, configs)

			scripts := run(t, nil, rpm, "-qp", "--scripts", pkg)
			if s.unit != "" {
				assert.Contains(t, scripts, "pkg="+s.name+"\n", "the scripts name their package")
				assert.NotContains(t, scripts, "@PACKAGE@")
				assert.Contains(t, scripts, "systemd-sysusers")
				assert.NotRegexp(t, `systemctl[^\n]*\s(enable|start)\s`, scripts, "the service is not enabled or started on install")
			} else {
				assert.Empty(t, strings.TrimSpace(scripts))
			}

			// rpm runs scriptlets chrooted into --root, and a scratch root
			// has no shell: --noscripts (the .deb test runs the same
			// scripts, packaging/scripts).
			root := t.TempDir()
			run(t, nil, rpm, "--root="+root, "--initdb")
			run(t, nil, rpm, "--root="+root, "-i", "--nodeps", "--noscripts", pkg)
			assert.Equal(t, s.name+"-"+r.version+"-1."+r.rpmArch, strings.TrimSpace(run(t, nil, rpm, "--root="+root, "-q", s.name)))
			checkInstalled(t, r, s, root)

			run(t, nil, rpm, "--root="+root, "-e", "--nodeps", "--noscripts", s.name)
			for _, p := range append(append([]string{"/usr/bin/" + s.name}, s.conffiles...), toolPaths(s)...) {
				assert.NoFileExists(t, filepath.Join(root, p))
			}
		})
	}
}

// checkInstalled checks what a package put into root: modes, the binary's
// --version and validate on the installed configs, the unit with
// systemd-analyze verify, the tmpfiles.d directories.
func checkInstalled(t *testing.T, r release, s spec, root string) {
	t.Helper()
	bin := filepath.Join(root, "usr/bin", s.name)
	assertMode(t, bin, 0o755)
	for _, c := range s.conffiles {
		if c == s.envFile {
			assertMode(t, filepath.Join(root, c), 0o640) // may hold passwords
		} else {
			assertMode(t, filepath.Join(root, c), 0o644)
		}
	}
	assertFileRequiresGlibc(t, bin)
	installed, err := os.ReadFile(bin)
	require.NoError(t, err)
	released, err := os.ReadFile(tarballBinary(t, r, s))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(installed, released), "the package's %s is not the tarball's", s.name)

	assertVersion(t, r, run(t, nil, bin, "--version"))

	for _, tool := range s.tools {
		path := filepath.Join(root, "usr/bin", tool)
		assertMode(t, path, 0o755)
		installed, err := os.ReadFile(path)
		require.NoError(t, err)
		released, err := os.ReadFile(ctlTarballBinary(t, r))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(installed, released), "the package's %s is not its tarball's", tool)
		checkCtl(t, path)
	}

	for _, v := range s.validations {
		validate(t, root, s, v)
	}

	if s.unit != "" {
		unit := filepath.Join(root, "usr/lib/systemd/system", s.unit)
		assertMode(t, unit, 0o644)
		assertMode(t, filepath.Join(root, s.sysusers), 0o644)
		b, err := os.ReadFile(unit)
		require.NoError(t, err)
		if s.name == "otelcol-gpu-agent" {
			// the configuration the environment file chooses, agent.yaml by default
			assert.Contains(t, string(b), "\nEnvironment=OTELCOL_GPU_CONFIG="+s.config+"\n")
			assert.Contains(t, string(b), "\nExecStart=/usr/bin/"+s.name+" --config=${OTELCOL_GPU_CONFIG} ")
		} else {
			assert.Contains(t, string(b), "\nExecStart=/usr/bin/"+s.name+" --config="+s.config+" ")
		}
		assert.Contains(t, string(b), "\nExecReload=/bin/kill -HUP $MAINPID\n")
		assert.Contains(t, string(b), "\nEnvironmentFile=-"+s.envFile+"\n")
		verifyUnit(t, root, s.unit)
	}
	if s.tmpfiles != "" {
		run(t, nil, "systemd-tmpfiles", "--root="+root, "--create", filepath.Base(s.tmpfiles))
		for _, d := range []string{"run/torch-fr", "run/nccl-inspector"} {
			fi, err := os.Stat(filepath.Join(root, d))
			require.NoError(t, err, "tmpfiles.d created no %s", d)
			assert.Equal(t, fs.ModeDir|fs.ModeSticky|0o777, fi.Mode(), d)
		}
	}
}

// assertVersion: --version names the VERSION file's version and the
// commit the release was made from.
func assertVersion(t *testing.T, r release, out string) {
	t.Helper()
	assert.Contains(t, out, " "+r.appVersion+"+"+r.commit, "--version does not print VERSION+commit")
}

// validate runs the installed binary's validate as the unit would run it
// (ExecStart's --config, then the words of OTELCOL_GPU_EXTRA_ARGS), with
// the environment file's variables; paths under / are root's.
func validate(t *testing.T, root string, s spec, v validation) {
	t.Helper()
	envFile := cmp.Or(v.envFile, s.envFile)
	var env []string
	if envFile != "" {
		env = readEnvFile(t, filepath.Join(root, envFile))
	}
	config := s.config
	for _, kv := range env {
		if c, ok := strings.CutPrefix(kv, "OTELCOL_GPU_CONFIG="); ok && c != "" {
			config = c // the unit's --config=${OTELCOL_GPU_CONFIG}
		}
	}
	args := []string{"validate", "--config=" + filepath.Join(root, config)}
	for _, kv := range env {
		if extra, ok := strings.CutPrefix(kv, "OTELCOL_GPU_EXTRA_ARGS="); ok {
			for _, a := range strings.Fields(extra) {
				path, ok := strings.CutPrefix(a, "--config=")
				require.True(t, ok, "%s: OTELCOL_GPU_EXTRA_ARGS has %q, expected --config=PATH", envFile, a)
				args = append(args, "--config="+filepath.Join(root, path))
			}
		}
	}
	for _, c := range v.configs {
		args = append(args, "--config="+filepath.Join(root, c))
	}
	for k, val := range v.vars {
		env = append(env, k+"="+val)
	}
	run(t, env, filepath.Join(root, "usr/bin", s.name), args...)
}

// verifyUnit runs systemd-analyze verify on the unit as installed in root,
// with root's /usr/bin: the system units it orders itself against
// (network-online.target, sysinit.target) are copied from this machine
// into root's /run/systemd/system, where a booted system has them too.
// Any complaint naming the unit fails, warnings included (an unknown or
// misspelt key is only a warning to systemd).
func verifyUnit(t *testing.T, root, unit string) {
	t.Helper()
	system := filepath.Join(root, "run/systemd/system")
	if _, err := os.Stat(system); err != nil {
		require.NoError(t, os.MkdirAll(system, 0o755))
		run(t, nil, "cp", "-a", "/usr/lib/systemd/system/.", system)
		// Only this machine's units: a copy of one of ours installed here
		// would shadow root's.
		for _, s := range specs {
			if s.unit != "" {
				require.NoError(t, os.RemoveAll(filepath.Join(system, s.unit)))
			}
		}
	}
	// ExecReload's kill is a base system's (util-linux, essential): this
	// machine's, as a booted system has it
	if _, err := os.Stat(filepath.Join(root, "bin/kill")); err != nil {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "bin"), 0o755))
		run(t, nil, "cp", "-L", "/bin/kill", filepath.Join(root, "bin/kill"))
	}
	out := run(t, nil, "systemd-analyze", "verify", "--man=no", "--root="+root, unit)
	for _, line := range strings.Split(out, "\n") {
		assert.NotContains(t, line, unit, "systemd-analyze verify complains")
	}
}

// assertReproducible: the same sources and commit time give the same
// package bytes (nfpm takes every time from SOURCE_DATE_EPOCH).
func assertReproducible(t *testing.T, released, rebuilt string) {
	t.Helper()
	a, err := os.ReadFile(released)
	require.NoError(t, err)
	b, err := os.ReadFile(rebuilt)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a, b), "%s differs from a rebuild of it: dist/ is older than the sources (make release again), or the build is not reproducible", released)
}

func assertMode(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if assert.NoError(t, err, "not installed") {
		assert.Equal(t, mode, fi.Mode().Perm(), "%s mode", path)
	}
}

// assertFileRequiresGlibc: the newest GLIBC_ symbol version the binary
// uses is the one the packages declare, no newer (the package would
// install where the binary cannot run) and no older (the dependency would
// be stricter than needed).
func assertFileRequiresGlibc(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	newest := []int{0, 0}
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if !ok {
			continue
		}
		parts := strings.Split(v, ".")
		if len(parts) < 2 {
			continue
		}
		major, err1 := strconv.Atoi(parts[0])
		minor, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			continue
		}
		if major > newest[0] || major == newest[0] && minor > newest[1] {
			newest = []int{major, minor}
		}
	}
	assert.Equal(t, declaredGlibc, strconv.Itoa(newest[0])+"."+strconv.Itoa(newest[1]),
		"%s needs glibc %d.%d: change the libc6 and libc.so.6 dependencies in packaging/*.yaml", bin, newest[0], newest[1])
}

// readEnvFile reads an EnvironmentFile's KEY=value lines as systemd does
// for these files (double quotes around a value at most).
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var env []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: not KEY=value: %q", path, line)
		// systemd removes the quotes around a value.
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
		env = append(env, key+"="+value)
	}
	return env
}

func sortedLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return lines
}

// TestSHA256SUMS: make release's SHA256SUMS lists every artifact of this
// version, and each one matches.
func TestSHA256SUMS(t *testing.T) {
	r := getRelease(t)
	need(t, "sha256sum", "coreutils")
	sums := filepath.Join(r.dist, "SHA256SUMS")
	requireArtifact(t, sums)

	cmd := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	cmd.Dir = r.dist
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "sha256sum --check:\n%s", out)

	b, err := os.ReadFile(sums)
	require.NoError(t, err)
	var listed []string
	for _, line := range sortedLines(string(b)) {
		_, name, ok := strings.Cut(line, "  ")
		require.True(t, ok, "SHA256SUMS: %q", line)
		listed = append(listed, name)
	}
	assert.Contains(t, listed, filepath.Base(r.tarball(ctlName)), "mk/ctl.mk's tarball")
	for _, s := range specs {
		for _, p := range []string{r.deb(s.name), r.rpm(s.name), r.tarball(s.name), r.sbom(s.name)} {
			assert.Contains(t, listed, filepath.Base(p))
		}
		// mk/image.mk's archive, named with VERSION.
		assert.Contains(t, listed, s.name+"_"+r.appVersion+"_linux_"+r.debArch+".oci.tar")
	}
}

func TestTarballs(t *testing.T) {
	r := getRelease(t)
	for _, s := range specs {
		t.Run(s.name, func(t *testing.T) { checkTarball(t, r, s) })
	}
}

func TestSBOMs(t *testing.T) {
	r := getRelease(t)
	for _, s := range specs {
		t.Run(s.name, func(t *testing.T) { checkSBOM(t, r, s) })
	}
}

// tarballBinary extracts the binary from the release's tarball.
func tarballBinary(t *testing.T, r release, s spec) string {
	t.Helper()
	path := r.tarball(s.name)
	requireArtifact(t, path)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	want := strings.TrimSuffix(filepath.Base(path), ".tar.gz") + "/" + s.name
	for {
		h, err := tr.Next()
		require.NoError(t, err, "%s has no %s", path, want)
		if h.Name == want {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			bin := filepath.Join(t.TempDir(), s.name)
			require.NoError(t, os.WriteFile(bin, b, 0o755))
			return bin
		}
	}
}

// checkTarball: the binary, LICENSE, README.md and the distribution's
// configs in one directory named like the tarball, and the binary runs.
func checkTarball(t *testing.T, r release, s spec) {
	path := r.tarball(s.name)
	requireArtifact(t, path)
	dir := strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	want := []string{dir + "/", dir + "/LICENSE", dir + "/README.md", dir + "/" + s.name}
	configs, err := filepath.Glob(filepath.Join("..", s.configDir, "*.yaml"))
	require.NoError(t, err)
	for _, c := range configs {
		if filepath.Base(c) != "manifest.yaml" {
			want = append(want, dir+"/"+filepath.Base(c))
		}
	}
	sort.Strings(want)

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var names []string
	bin := filepath.Join(t.TempDir(), s.name)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.Equal(t, 0, h.Uid, h.Name)
		assert.Equal(t, 0, h.Gid, h.Name)
		if h.Name == dir+"/"+s.name {
			assert.Equal(t, int64(0o755), h.Mode&0o777)
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(bin, b, 0o755))
		}
	}
	assert.Equal(t, want, names)
	assertVersion(t, r, run(t, nil, bin, "--version"))
}

// checkSBOM: a CycloneDX document whose components are exactly the
// modules linked into the binary (its build info), at the same versions,
// with the collector core at v1.71.0/v0.165.0 and this repository's module
// at the commit built.
func checkSBOM(t *testing.T, r release, s spec) {
	path := r.sbom(s.name)
	requireArtifact(t, path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var bom struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct {
			Name    string
			Version string
			Hashes  []json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal(b, &bom))
	assert.Equal(t, "CycloneDX", bom.BOMFormat)
	components := map[string]string{}
	for _, c := range bom.Components {
		components[c.Name] = c.Version
		assert.NotEmpty(t, c.Hashes, "%s has no hash", c.Name)
	}
	assert.Equal(t, "v1.71.0", components["go.opentelemetry.io/collector/component"])
	assert.Equal(t, "v0.165.0", components["go.opentelemetry.io/collector/otelcol"])
	repo := components["github.com/otelcol-gpu/otelcol-gpu"]
	require.NotEmpty(t, repo, "the SBOM does not list this repository's module")
	assert.True(t, strings.HasSuffix(repo, "-"+r.commit), "this repository's module is %s, HEAD is %s", repo, r.commit)

	// The same modules as the binary released (the tarball's: bin/ may have
	// been rebuilt since).
	info, err := buildinfo.ReadFile(tarballBinary(t, r, s))
	require.NoError(t, err)
	linked := map[string]string{}
	for _, d := range info.Deps {
		linked[d.Path] = d.Version
	}
	delete(linked, "github.com/otelcol-gpu/otelcol-gpu") // v0.0.0 => ../.. in the binary
	delete(components, "github.com/otelcol-gpu/otelcol-gpu")
	assert.Equal(t, linked, components, "the SBOM's components differ from the modules in the released %s", s.name)
}

// nfpmBin is the pinned nfpm the packages are built with (.tools/bin).
func nfpmBin(t *testing.T) string {
	t.Helper()
	nfpm := filepath.Join("..", ".tools", "bin", "nfpm")
	_, err := os.Stat(nfpm)
	require.NoError(t, err, "%s is missing: make tools installs it", nfpm)
	return nfpm
}

// toolPaths are the installed paths of s's tools.
func toolPaths(s spec) []string {
	var paths []string
	for _, tool := range s.tools {
		paths = append(paths, "/usr/bin/"+tool)
	}
	return paths
}

// TestCtlTarball: mk/ctl.mk's tarball holds otelcol-gpu-ctl, LICENSE and
// the console's README.md in one directory named like it, owned by root,
// and the binary is static and runs.
func TestCtlTarball(t *testing.T) {
	r := getRelease(t)
	path := r.tarball(ctlName)
	requireArtifact(t, path)
	dir := strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.Equal(t, 0, h.Uid, h.Name)
		assert.Equal(t, 0, h.Gid, h.Name)
		if h.Name == dir+"/"+ctlName {
			assert.Equal(t, int64(0o755), h.Mode&0o777)
		}
	}
	assert.Equal(t, []string{dir + "/", dir + "/LICENSE", dir + "/README.md", dir + "/" + ctlName}, names)
	checkCtl(t, ctlTarballBinary(t, r))
}

// ctlTarballBinary extracts otelcol-gpu-ctl from its release tarball.
func ctlTarballBinary(t *testing.T, r release) string {
	t.Helper()
	return tarballBinary(t, r, spec{name: ctlName})
}

// checkCtl: otelcol-gpu-ctl is static (no cgo: no interpreter, no shared
// library, it runs on any Linux machine) and answers -h with its usage
// (exit 2, as for every usage message).
func checkCtl(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "%s is dynamically linked: build it with CGO_ENABLED=0 (mk/ctl.mk)", bin)
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs, "%s links shared libraries", bin)

	out, err := exec.Command(bin, "-h").CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s -h: %s", bin, out)
	assert.Equal(t, 2, exit.ExitCode(), "%s -h: the usage status", bin)
	assert.Contains(t, string(out), "usage: otelcol-gpu-ctl")
}
