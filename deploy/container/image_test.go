//go:build image

package container

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// image is one image of `make image` and what its check runs.
type image struct {
	name string // image and binary
	dist string // distributions/<dist>: its shipped configs
	// Each entry is one `validate` run: the --config files, in order, from
	// /etc/otelcol-gpu.
	validate [][]string
	// More binaries in /usr/bin, static, built into bin/ (mk/ctl.mk).
	tools []string
}

var images = []image{
	{name: "otelcol-gpu-agent", dist: "agent", validate: [][]string{
		{"config.yaml"},
		{"config.yaml", "kafka-tls-sasl.yaml"},
		{"config.yaml", "otlp-auth.yaml"},
		{"config.yaml", "repair.yaml", "repair-tls.yaml"},
	}},
	{name: "otelcol-gpu-gateway", dist: "gateway", validate: [][]string{
		{"config.yaml"},
		{"config.yaml", "kafka-tls-sasl.yaml"},
		{"config.yaml", "small-cluster.yaml"},
		// The fault console, merged last in each mode.
		{"config.yaml", "console.yaml"},
		{"config.yaml", "kafka-tls-sasl.yaml", "console.yaml"},
		{"config.yaml", "small-cluster.yaml", "small-cluster-console.yaml"},
	}, tools: []string{"otelcol-gpu-ctl"}},
	{name: "otelcol-gpu", dist: "otelcol-gpu", validate: [][]string{
		{"config.yaml"},
		{"config.yaml", "console.yaml"},
	}},
}

// runEnv is set for every command run in a container: what the overlays
// refuse to start without (credentials, a token), and every listener of
// the agent on a free loopback port, since chroot isolation shares this
// machine's network (other tests may hold the default ports).
var runEnv = []string{
	"KAFKA_SASL_USERNAME=image-test",
	"KAFKA_SASL_PASSWORD=image-test",
	"KAFKA_TLS_CA_FILE=/etc/ssl/certs/ca-certificates.crt",
	"OTLP_BEARER_TOKEN=image-test",
	"OTLP_GRPC_ENDPOINT=127.0.0.1:0",
	"OTLP_HTTP_ENDPOINT=127.0.0.1:0",
	"OTELCOL_GPU_HEALTH_ENDPOINT=127.0.0.1:0",
	"OTELCOL_GPU_TELEMETRY_HOST=127.0.0.1",
	"OTELCOL_GPU_TELEMETRY_PORT=0",
	// The gateway's small-cluster fragment requires its certificate, key
	// and the agents' tokens, the console's fragments a token file; as
	// files named here: validate does not read them (the chart mounts
	// them at these paths).
	"OTELCOL_GPU_CENTRAL_TLS_CERT_FILE=/etc/otelcol-gpu-central-tls/tls.crt",
	"OTELCOL_GPU_CENTRAL_TLS_KEY_FILE=/etc/otelcol-gpu-central-tls/tls.key",
	"OTELCOL_GPU_AGENT_TOKENS_FILE=/etc/otelcol-gpu-central-token/token",
	"OTELCOL_GPU_CONSOLE_TOKEN_FILE=/etc/otelcol-gpu/console/token",
	// The agent's repair endpoint (repair-tls.yaml) on a free port.
	"REPAIR_ENDPOINT=127.0.0.1:0",
	"REPAIR_TLS_CERT_FILE=/etc/otelcol-gpu-repair-tls/tls.crt",
	"REPAIR_TLS_KEY_FILE=/etc/otelcol-gpu-repair-tls/tls.key",
}

// The user every image runs as (deploy/container/README.md): the gateway's
// StatefulSet and the systemd units run the same UID.
const imageUser = "10001:10001"

// TestImages builds the three images as CI does (make image
// IMAGE_BASE=local: the base made from this machine, the binaries of bin/)
// and checks each one: its labels and user, and its binary run inside it
// with buildah's chroot isolation (podman run needs an OCI runtime, which
// cannot set rlimits or cgroups on these machines; buildah's chroot
// isolation is what the image's own build uses).
func TestImages(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	vars := makeVars(t, root)
	b := buildah{bin: vars["BUILDAH"], flags: strings.Fields(vars["BUILDAH_FLAGS"])}
	_, err = exec.LookPath(b.bin)
	require.NoError(t, err, "%s not found: make image-deps installs it (Debian package buildah)", b.bin)

	build := exec.Command("make", "-C", root, "image", "IMAGE_BASE=local")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "make image IMAGE_BASE=local:\n%s", out)

	self, err := os.Executable()
	require.NoError(t, err)
	for _, im := range images {
		t.Run(im.name, func(t *testing.T) {
			ref := vars["IMAGE_REGISTRY"] + "/" + im.name + ":" + vars["IMAGE_TAG"]
			cfg := b.inspect(t, ref)

			labels := cfg.OCIv1.Config.Labels
			assert.Equal(t, im.name, labels["org.opencontainers.image.title"])
			assert.NotEmpty(t, labels["org.opencontainers.image.description"])
			assert.Equal(t, vars["VERSION"], labels["org.opencontainers.image.version"])
			assert.Equal(t, vars["COMMIT"], labels["org.opencontainers.image.revision"])
			assert.Equal(t, vars["IMAGE_CREATED"], labels["org.opencontainers.image.created"])
			assert.Equal(t, "https://github.com/otelcol-gpu/otelcol-gpu", labels["org.opencontainers.image.source"])
			assert.Equal(t, "Apache-2.0", labels["org.opencontainers.image.licenses"])
			assert.Equal(t, imageUser, cfg.OCIv1.Config.User)
			entrypoint := append(append([]string{}, cfg.OCIv1.Config.Entrypoint...), cfg.OCIv1.Config.Cmd...)
			require.Equal(t, []string{"/usr/bin/" + im.name, "--config=/etc/otelcol-gpu/config.yaml"}, entrypoint)

			ctr := b.from(t, ref)
			mnt := b.mount(t, ctr)

			// The shipped configs are this checkout's.
			for _, set := range im.validate {
				for _, f := range set {
					want, err := os.ReadFile(filepath.Join(root, "distributions", im.dist, f))
					require.NoError(t, err)
					got, err := os.ReadFile(filepath.Join(mnt, "etc/otelcol-gpu", f))
					require.NoError(t, err, "%s: /etc/otelcol-gpu/%s", ref, f)
					assert.True(t, bytes.Equal(want, got), "%s: /etc/otelcol-gpu/%s differs from distributions/%s/%s", ref, f, im.dist, f)
				}
			}

			// The stamped version and commit (the Makefile's BUILD_VERSION).
			out := b.run(t, ctr, nil, entrypoint[0], "--version")
			assert.Equal(t, fmt.Sprintf("%s version %s+%s\n", im.name, vars["VERSION"], vars["COMMIT"]), out)

			for _, set := range im.validate {
				args := []string{entrypoint[0], "validate"}
				for _, f := range set {
					args = append(args, "--config=/etc/otelcol-gpu/"+f)
				}
				b.run(t, ctr, nil, args...)
			}

			// Who a process of the image is: this test binary, mounted in,
			// answers (the images have no shell).
			out = b.run(t, ctr, []string{"-v", self + ":/otelcol-gpu-image-test:ro", "-e", whoamiEnv + "=1"}, "/otelcol-gpu-image-test")
			assert.Equal(t, "uid=10001 gid=10001\n", out)

			for _, tool := range im.tools {
				checkTool(t, b, ctr, mnt, root, tool)
			}

			if im.name == "otelcol-gpu-agent" {
				checkAgentWithoutDCGM(t, b, ctr, mnt, entrypoint)
			}
		})
	}
}

// checkAgentWithoutDCGM starts the agent image as it is (entrypoint, shipped
// config, the image's user) on the local base, which has no libdcgm.so.4
// like a node with neither the DCGM base nor a mounted library: the agent
// must start everything else and say once why it has no GPU source.
// It reads the log until both the ready line and the DCGM warning came
// (nothing else ends the wait: if the warning changed and no longer names
// libdcgm.so.4, the run hangs until go test's -timeout, naming this test).
func checkAgentWithoutDCGM(t *testing.T, b buildah, ctr, mnt string, entrypoint []string) {
	args := append(append([]string{}, b.flags...), "run", "--isolation", "chroot")
	for _, e := range runEnv {
		args = append(args, "-e", e)
	}
	args = append(append(args, ctr, "--"), entrypoint...)
	cmd := exec.Command(b.bin, args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	var log []string
	var dcgm []string
	ready := false
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		log = append(log, line)
		if strings.Contains(line, "Everything is ready") {
			ready = true
		}
		if strings.Contains(line, "libdcgm.so.4") {
			dcgm = append(dcgm, line)
		}
		if ready && len(dcgm) > 0 {
			break
		}
	}
	// buildah run passes SIGTERM on to the agent and reaps it.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	go func() { _, _ = bufio.NewReader(stderr).WriteTo(new(bytes.Buffer)) }()
	_ = cmd.Wait()

	all := strings.Join(log, "\n")
	require.True(t, ready, "the agent image did not start:\n%s", all)
	require.Len(t, dcgm, 1, "the agent without libdcgm.so.4 must say so once:\n%s", all)
	assert.Contains(t, dcgm[0], "\twarn\t", "the missing DCGM library is a warning, not an error: %s", dcgm[0])
	assert.Contains(t, dcgm[0], "other receivers keep running", dcgm[0])
	// No GPU, no Kafka, no dump directories here: each is a warning of its
	// receiver or exporter, none an error.
	assert.NotContains(t, all, "\terror\t", "the agent logged an error:\n%s", all)

	// The image's user could write the state directory: file_storage made
	// the queue there.
	fi, err := os.Stat(filepath.Join(mnt, "var/lib/otelcol-gpu/agent/queue"))
	require.NoError(t, err, "the agent's queue directory in its state directory:\n%s", all)
	st, ok := fi.Sys().(*syscall.Stat_t)
	require.True(t, ok)
	assert.Equal(t, uint32(10001), st.Uid, "the queue directory's owner")
}

// checkTool: /usr/bin/<tool> is bin/<tool> (mode 0755), static (the image
// needs no library for it), and runs in the image as its user: -h prints
// its usage with the usage status, 2.
func checkTool(t *testing.T, b buildah, ctr, mnt, root, tool string) {
	t.Helper()
	path := filepath.Join(mnt, "usr/bin", tool)
	fi, err := os.Stat(path)
	require.NoError(t, err, "/usr/bin/%s", tool)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "/usr/bin/%s mode", tool)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join(root, "bin", tool))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "/usr/bin/%s is not bin/%s", tool, tool)
	f, err := elf.Open(path)
	require.NoError(t, err)
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "/usr/bin/%s is dynamically linked (mk/ctl.mk builds it with CGO_ENABLED=0)", tool)
	}
	require.NoError(t, f.Close())

	args := append(append([]string{}, b.flags...), "run", "--isolation", "chroot", ctr, "--", "/usr/bin/"+tool, "-h")
	out, err := exec.Command(b.bin, args...).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s -h in the image: %s", tool, out)
	assert.Equal(t, 2, exit.ExitCode(), "%s -h: the usage status:\n%s", tool, out)
	assert.Contains(t, string(out), "usage: "+tool)
}

// makeVars reads what mk/image.mk builds with (make image-vars), so the
// check names the images and the stamp exactly as the build does.
func makeVars(t *testing.T, root string) map[string]string {
	out, err := exec.Command("make", "-s", "-C", root, "image-vars", "IMAGE_BASE=local").Output()
	require.NoError(t, err, "make image-vars")
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "make image-vars: not NAME=value: %q", line)
		vars[k] = v
	}
	for _, k := range []string{"VERSION", "COMMIT", "IMAGE_REGISTRY", "IMAGE_TAG", "IMAGE_CREATED", "BUILDAH"} {
		require.NotEmpty(t, vars[k], "make image-vars: no %s", k)
	}
	_, err = time.Parse(time.RFC3339, vars["IMAGE_CREATED"])
	require.NoError(t, err, "make image-vars: IMAGE_CREATED")
	return vars
}

type buildah struct {
	bin   string
	flags []string
}

func (b buildah) cmd(args ...string) *exec.Cmd {
	return exec.Command(b.bin, append(append([]string{}, b.flags...), args...)...)
}

func (b buildah) output(t *testing.T, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	c := b.cmd(args...)
	c.Stderr = &stderr
	out, err := c.Output()
	require.NoError(t, err, "buildah %s:\n%s%s", strings.Join(args, " "), out, stderr.String())
	return string(out)
}

type imageConfig struct {
	OCIv1 struct {
		Config struct {
			User       string            `json:"User"`
			Entrypoint []string          `json:"Entrypoint"`
			Cmd        []string          `json:"Cmd"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
	} `json:"OCIv1"`
}

func (b buildah) inspect(t *testing.T, ref string) imageConfig {
	t.Helper()
	var cfg imageConfig
	require.NoError(t, json.Unmarshal([]byte(b.output(t, "inspect", "--type", "image", ref)), &cfg), "buildah inspect %s", ref)
	return cfg
}

// from makes a working container of ref, removed at the end of the test.
func (b buildah) from(t *testing.T, ref string) string {
	t.Helper()
	ctr := strings.TrimSpace(b.output(t, "from", "--pull-never", ref))
	t.Cleanup(func() {
		out, err := b.cmd("rm", ctr).CombinedOutput()
		assert.NoError(t, err, "buildah rm %s: %s", ctr, out)
	})
	return ctr
}

// mount returns the working container's root filesystem on this machine.
func (b buildah) mount(t *testing.T, ctr string) string {
	t.Helper()
	mnt := strings.TrimSpace(b.output(t, "mount", ctr))
	t.Cleanup(func() {
		out, err := b.cmd("umount", ctr).CombinedOutput()
		assert.NoError(t, err, "buildah umount %s: %s", ctr, out)
	})
	return mnt
}

// run runs argv in the working container as the image's user, with runEnv
// and the extra buildah run options opts, and returns its standard output;
// a non-zero exit fails the test with what it printed.
func (b buildah) run(t *testing.T, ctr string, opts []string, argv ...string) string {
	t.Helper()
	args := []string{"run", "--isolation", "chroot"}
	for _, e := range runEnv {
		args = append(args, "-e", e)
	}
	args = append(append(append(args, opts...), ctr, "--"), argv...)
	return b.output(t, args...)
}
