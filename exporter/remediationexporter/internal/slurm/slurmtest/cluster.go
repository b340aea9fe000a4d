//go:build slurm

// Package slurmtest runs a real Slurm cluster for tests: slurmctld and one
// slurmd per fake node on localhost, configured in a temporary directory
// (auth/none, no munge). It needs Debian's slurmctld, slurmd, slurm-client
// and slurmrestd; the build tag keeps it out of ordinary builds.
package slurmtest // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm/slurmtest"

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requiredBinaries are the Debian packages' programs these tests run.
var requiredBinaries = map[string]string{
	"slurmctld":  "slurmctld",
	"slurmd":     "slurmd",
	"scontrol":   "slurm-client",
	"sinfo":      "slurm-client",
	"slurmrestd": "slurmrestd",
}

// Cluster is a real slurmctld and one slurmd per node on localhost,
// configured in a temporary directory.
type Cluster struct {
	t     *testing.T
	Dir   string   // state, spool, logs and slurm.conf
	Conf  string   // the slurm.conf path
	Nodes []string // gpu-node1..n, each with a gpu GRES (Gres=gpu:8)
	// CPUNodes are cpu-node1..m, without GRES: a login or control node.
	CPUNodes []string
	Env      []string          // SLURM_CONF=...: what a client (scontrol, the exporter) needs
	bins     map[string]string // program -> resolved path
	procs    []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// GPUsPerNode is the gpu GRES count of each GPU node.
const GPUsPerNode = 8

// Start brings up a cluster of n GPU nodes gpu-node1..n and waits until
// sinfo shows every node idle.
func Start(t *testing.T, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, 0)
}

// StartWith brings up gpu GPU nodes gpu-node1..gpu and cpu nodes without
// GRES cpu-node1..cpu, and waits until sinfo shows every node idle.
func StartWith(t *testing.T, gpu, cpu int) *Cluster {
	t.Helper()
	return StartOpts(t, Options{GPUNodes: gpu, CPUNodes: cpu})
}

// Options shape a test cluster.
type Options struct {
	GPUNodes int // gpu-node1..n, each with Gres=gpu:8
	CPUNodes int // cpu-node1..m, without GRES
	// ResumeTimeout is slurm.conf's ResumeTimeout: how long slurmctld
	// waits for a rebooted node to register before it marks the node DOWN
	// ("reboot timed out"). Default 60s, Slurm's own.
	ResumeTimeout time.Duration
}

// StartOpts brings up the cluster opts describe and waits until sinfo
// shows every node idle.
func StartOpts(t *testing.T, opts Options) *Cluster {
	t.Helper()
	if opts.ResumeTimeout < time.Second {
		opts.ResumeTimeout = 60 * time.Second
	}
	gpu, cpu := opts.GPUNodes, opts.CPUNodes
	n := gpu + cpu
	bins := make(map[string]string)
	for bin, pkg := range requiredBinaries {
		path, err := exec.LookPath(bin)
		if err != nil {
			// Debian puts the daemons in /usr/sbin, often not on a user's PATH.
			if _, serr := os.Stat("/usr/sbin/" + bin); serr == nil {
				path, err = "/usr/sbin/"+bin, nil
			}
		}
		bins[bin] = path
		if err != nil {
			t.Fatalf("%s not found (%v): these tests need a real Slurm 22.05+; on Debian run: apt-get install -y slurmctld slurmd slurm-client slurmrestd (package %s)", bin, err, pkg)
		}
	}
	// Not t.TempDir: slurmrestd drops to an unprivileged user and must
	// still read slurm.conf and bind its socket here.
	dir, err := os.MkdirTemp("", "slurm-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, n+2)
	var conf strings.Builder
	fmt.Fprintf(&conf, `ClusterName=otelcolgpu
SlurmctldHost=localhost
AuthType=auth/none
CredType=cred/none
SlurmctldPort=%d
SlurmdPort=%d
StateSaveLocation=%[3]s/state
SlurmdSpoolDir=%[3]s/spool/%%n
SlurmctldPidFile=%[3]s/slurmctld.pid
SlurmdPidFile=%[3]s/slurmd-%%n.pid
SlurmctldLogFile=%[3]s/slurmctld.log
SlurmdLogFile=%[3]s/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MailProg=/bin/true
SlurmUser=%[4]s
SlurmdUser=%[4]s
ReturnToService=2
SlurmdTimeout=300
SchedulerType=sched/builtin
SelectType=select/linear
GresTypes=gpu
RebootProgram=%[3]s/reboot-program
ResumeTimeout=%[5]d
`, ports[0], ports[1], dir, u.Username, int(opts.ResumeTimeout/time.Second))
	c := &Cluster{t: t, Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), bins: bins}
	// RebootProgram only records that it ran, and when (every slurmd runs
	// on this one host, so it cannot tell which node it is for): the test
	// plays the machine's reboot with Reboot.
	script := fmt.Sprintf("#!/bin/sh\necho \"$(date +%%s) $*\" >> %s\n", filepath.Join(dir, "reboots.log"))
	if err := os.WriteFile(filepath.Join(dir, "reboot-program"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// There are no GPUs. slurmd drops a GPU without a device file, and
	// wants a character device: links to /dev/null stand in for them.
	devDir := filepath.Join(dir, "dev")
	if err := os.Mkdir(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range GPUsPerNode {
		if err := os.Symlink("/dev/null", filepath.Join(devDir, fmt.Sprintf("nvidia%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var gresConf strings.Builder
	for i := 1; i <= n; i++ {
		name, gres := fmt.Sprintf("gpu-node%d", i), fmt.Sprintf(" Gres=gpu:%d", GPUsPerNode)
		if i > gpu {
			name, gres = fmt.Sprintf("cpu-node%d", i-gpu), ""
			c.CPUNodes = append(c.CPUNodes, name)
		} else {
			c.Nodes = append(c.Nodes, name)
			fmt.Fprintf(&gresConf, "NodeName=%s Name=gpu File=%s/nvidia[0-%d]\n", name, devDir, GPUsPerNode-1)
		}
		fmt.Fprintf(&conf, "NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=1 RealMemory=1%s State=UNKNOWN\n", name, ports[i+1], gres)
		if err := os.MkdirAll(filepath.Join(dir, "spool", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "gres.conf"), []byte(gresConf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	conf.WriteString("PartitionName=gpu Nodes=ALL Default=YES State=UP\n")
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.Conf, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Env = []string{"SLURM_CONF=" + c.Conf}
	t.Cleanup(c.stop)

	c.startDaemon("slurmctld", "slurmctld", "-D", "-i", "-f", c.Conf)
	for _, name := range append(slices.Clone(c.Nodes), c.CPUNodes...) {
		c.startDaemon("slurmd-"+name, "slurmd", "-D", "-N", name, "-f", c.Conf)
	}
	c.WaitFor("every node idle", func() bool {
		out, err := c.Try("sinfo", "-h", "-N", "-o", "%N %T")
		if err != nil {
			return false
		}
		idle := 0
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
				idle++
			}
		}
		return idle == n
	})
	return c
}

func (c *Cluster) startDaemon(name, bin string, args ...string) *proc {
	c.t.Helper()
	p := &proc{name: name, log: filepath.Join(c.Dir, name+".out"), done: make(chan error, 1)}
	f, err := os.Create(p.log)
	if err != nil {
		c.t.Fatal(err)
	}
	if path, ok := c.bins[bin]; ok {
		bin = path
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), c.Env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		_ = f.Close()
		c.t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		p.done <- p.cmd.Wait()
		_ = f.Close()
	}()
	c.procs = append(c.procs, p)
	return p
}

// terminate ends the process: SIGTERM, then SIGKILL.
func (p *proc) terminate() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		p.done <- <-p.done
	}
}

// stop ends the daemons (SIGTERM, then SIGKILL) and removes the directory.
func (c *Cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].terminate()
	}
	if c.t.Failed() {
		for _, p := range c.procs {
			if b, err := os.ReadFile(p.log); err == nil && len(b) > 0 {
				c.t.Logf("%s output:\n%s", p.name, tail(b, 2000))
			}
		}
		if b, err := os.ReadFile(filepath.Join(c.Dir, "slurmctld.log")); err == nil {
			c.t.Logf("slurmctld.log:\n%s", tail(b, 4000))
		}
	}
	_ = os.RemoveAll(c.Dir)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// CheckAlive fails the test when a daemon has exited.
func (c *Cluster) CheckAlive() {
	c.t.Helper()
	for _, p := range c.procs {
		select {
		case err := <-p.done:
			p.done <- err
			b, _ := os.ReadFile(p.log)
			c.t.Fatalf("%s exited (%v):\n%s", p.name, err, tail(b, 2000))
		default:
		}
	}
}

// WaitFor polls Slurm until cond holds (slurmctld updates node states
// asynchronously: a resumed node reads idle* until it is pinged).
func (c *Cluster) WaitFor(what string, cond func() bool) {
	c.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		c.CheckAlive()
		select {
		case <-c.t.Context().Done():
			c.t.Fatalf("gave up waiting for %s", what)
		case <-tick.C:
		}
	}
}

func (c *Cluster) Try(bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(c.t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %v: %w: %s", bin, args, err, errb.String())
	}
	return out.String(), nil
}

// Run runs a Slurm client command and fails the test on error.
func (c *Cluster) Run(bin string, args ...string) string {
	c.t.Helper()
	out, err := c.Try(bin, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// NodeLine is `scontrol -o show node <n>`.
func (c *Cluster) NodeLine(name string) string {
	return c.Run("scontrol", "-o", "show", "node", name)
}

// DrainReasons is `sinfo -R` as node -> reason.
func (c *Cluster) DrainReasons() map[string]string {
	out := c.Run("sinfo", "-R", "-h", "-N", "-o", "%N|%E")
	reasons := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if node, reason, ok := strings.Cut(line, "|"); ok {
			reasons[node] = reason
		}
	}
	return reasons
}

// StartSlurmrestd runs the real slurmrestd on a unix socket with local
// authentication (22.05's Debian build has no auth/jwt for slurmctld).
func (c *Cluster) StartSlurmrestd(apiVersion string) string {
	c.t.Helper()
	sockDir := filepath.Join(c.Dir, "rest")
	if err := os.Mkdir(sockDir, 0o777); err != nil {
		c.t.Fatal(err)
	}
	_ = os.Chmod(sockDir, 0o777)
	sock := filepath.Join(sockDir, "slurmrestd.socket")
	args := []string{"-a", "rest_auth/local", "-s", "openapi/" + apiVersion, "-f", c.Conf}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody") // slurmrestd refuses to run as root
	}
	c.startDaemon("slurmrestd", "slurmrestd", append(args, "unix:"+sock)...)
	c.WaitFor("slurmrestd socket", func() bool {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	})
	return sock
}

// RebootRequests lists RebootProgram's runs, one line a run: "<unix time>
// <arguments>".
func (c *Cluster) RebootRequests() []string {
	b, err := os.ReadFile(filepath.Join(c.Dir, "reboots.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// Reboot plays node's reboot after RebootProgram was run: its slurmd stops
// and starts again in a new time namespace whose boot time is now, as on a
// machine that just booted (slurmd reports its uptime, slurmctld takes the
// node's BootTime from it and the reboot as done once BootTime is after
// the request).
func (c *Cluster) Reboot(node string) {
	c.t.Helper()
	i := slices.IndexFunc(c.procs, func(p *proc) bool { return p.name == "slurmd-"+node })
	if i < 0 {
		c.t.Fatalf("reboot %s: no such slurmd", node)
	}
	// slurmctld takes a reboot as done only when the node booted after
	// the request, to the second: boot in a later second than
	// RebootProgram's last run.
	if reqs := c.RebootRequests(); len(reqs) > 0 {
		if ran, err := strconv.ParseInt(strings.Fields(reqs[len(reqs)-1])[0], 10, 64); err == nil {
			time.Sleep(time.Until(time.Unix(ran+1, 0)))
		}
	}
	c.procs[i].terminate()
	c.procs = slices.Delete(c.procs, i, i+1)
	raw, err := os.ReadFile("/proc/uptime")
	if err != nil {
		c.t.Fatal(err)
	}
	var uptime float64
	if _, err := fmt.Sscanf(string(raw), "%f", &uptime); err != nil {
		c.t.Fatalf("/proc/uptime: %v", err)
	}
	args := []string{"--time", "--boottime", strconv.FormatInt(-int64(uptime), 10)}
	if os.Geteuid() != 0 {
		args = append([]string{"--user", "--map-current-user"}, args...)
	}
	slurmd := c.bins["slurmd"]
	c.startDaemon("slurmd-"+node, "unshare", append(args, slurmd, "-D", "-N", node, "-f", c.Conf)...)
}
