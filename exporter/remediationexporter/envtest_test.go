//go:build envtest

// The whole exporter, built by its factory from a kubeconfig, against a real
// kube-apiserver and etcd (controller-runtime's envtest). Build the binaries
// first (make envtest-bin), then:
//
//	go test -tags envtest -run TestEnvtestExporter -v ./exporter/remediationexporter/
package remediationexporter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// poolLabel puts each scenario's nodes in their own pool: the breaker's
// share is taken of the pool (gpu_node_selector), so scenarios sharing one
// API server do not count each other's nodes.
const poolLabel = "otelcol-gpu.test/pool"

type controlPlane struct {
	cfg        *rest.Config
	kubeconfig string // file written from envtest's admin kubeconfig
	client     kubernetes.Interface
}

// startControlPlane starts kube-apiserver and etcd from .tools/envtest-bin
// (or $ENVTEST_BIN_DIR). Missing binaries fail: a skipped test would let
// `make platform-test` pass without ever talking to an API server.
func startControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	dir := os.Getenv("ENVTEST_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".tools", "envtest-bin")
	}
	dir, err := filepath.Abs(dir)
	require.NoError(t, err)
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			t.Fatalf("envtest binary %s missing in %s: run tools/envtest/build.sh (or make envtest-bin) first", bin, dir)
		}
	}
	ctrllog.SetLogger(logr.Discard())
	useExisting := false
	env := &envtest.Environment{BinaryAssetsDirectory: dir, UseExistingCluster: &useExisting,
		// NVSentinel's janitor CRDs, for the repair loop's objects
		// (repair_envtest_test.go).
		CRDDirectoryPaths: []string{filepath.Join("internal", "k8s", "testdata", "nvsentinel")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	require.NoError(t, err, "start kube-apiserver and etcd")
	t.Cleanup(func() { assert.NoError(t, env.Stop()) })

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, env.KubeConfig, 0o600))
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	require.NoError(t, err)
	_, err = client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k8s.DefaultNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &controlPlane{cfg: cfg, kubeconfig: kubeconfig, client: client}
}

// createGPUNodes creates nodes with 8 GPUs of capacity in pool, as a kubelet
// with the device plugin would register them.
func (cp *controlPlane) createGPUNodes(t *testing.T, pool string, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{poolLabel: pool}}}
		created, err := cp.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(t, err)
		// No kubelet: drop the not-ready taint the admission plugin adds, so
		// taint assertions are exact.
		if len(created.Spec.Taints) > 0 {
			created.Spec.Taints = nil
			_, err = cp.client.CoreV1().Nodes().Update(ctx, created, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		// A kubelet's registration leaves managedFields on a real node; this
		// API server starts tracking a node's managers only at its first
		// apply, and Release reads who set the cordon from them.
		created, err = cp.client.CoreV1().Nodes().Patch(ctx, name, types.ApplyPatchType,
			[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+name+`"}}`),
			metav1.PatchOptions{FieldManager: "kubelet"})
		require.NoError(t, err)
		created.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		created.Status.Allocatable = created.Status.Capacity
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
		_, err = cp.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

func (cp *controlPlane) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := cp.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// waitNode watches one node until cond holds (the test's context bounds
// the wait).
func (cp *controlPlane) waitNode(t *testing.T, name, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	n := cp.node(t, name)
	if cond(n) {
		return n
	}
	w, err := cp.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: n.ResourceVersion,
	})
	require.NoError(t, err)
	defer w.Stop()
	for ev := range w.ResultChan() {
		if n, ok := ev.Object.(*corev1.Node); ok && cond(n) {
			return n
		}
	}
	t.Fatalf("node %s: gave up waiting until %s", name, what)
	return nil
}

// kubeConfig is an acting config on the Kubernetes platform for pool, with
// its own breaker ConfigMap and Lease.
func (cp *controlPlane) kubeConfig(t *testing.T, hookURL, pool string, maxShare float64) *Config {
	cfg := actingConfig(t, hookURL)
	cfg.Kubernetes.Enabled = true
	cfg.Kubernetes.Kubeconfig = cp.kubeconfig
	cfg.Kubernetes.GPUNodeSelector = poolLabel + "=" + pool
	cfg.Kubernetes.Breaker.MaxShare = maxShare
	// The breaker is the rail these scenarios test; the quarantined-share
	// cap has its own (rails_envtest_test.go).
	cfg.MaxQuarantinedFraction = 1
	cfg.Kubernetes.Breaker.Name = "breaker-" + pool
	cfg.Kubernetes.Lease.Name = "leader-" + pool
	return cfg
}

// startLeader starts the exporter and waits until it holds its Lease: a
// replica that is not the leader audits "not the leader" and acts on nothing.
func startLeader(t *testing.T, cfg *Config) *remediationExporter {
	t.Helper()
	exp := startFromFactory(t, cfg)
	require.Eventually(t, exp.leader.IsLeader, 30*time.Second, 10*time.Millisecond, "exporter never took the lease")
	return exp
}

func quarantined(n *corev1.Node) bool {
	return n.Spec.Unschedulable && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == k8s.DefaultTaintKey })
}

func released(n *corev1.Node) bool {
	return !n.Spec.Unschedulable && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == k8s.DefaultTaintKey })
}

func gpuHealthy(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if string(c.Type) == k8s.DefaultConditionType {
			return c.Status
		}
	}
	return ""
}

func consumeRecords(t *testing.T, exp *remediationExporter, recs ...fault.Record) {
	t.Helper()
	require.NoError(t, exp.ConsumeLogs(context.Background(), logsOf(semconv.ScopeFaultRecords, recs...)))
}

// TestEnvtestExporter shares one control plane between the scenarios; each
// has its own exporter, node pool, breaker ConfigMap and Lease.
func TestEnvtestExporter(t *testing.T) {
	cp := startControlPlane(t)
	t.Run("DBEThenDuplicatesAndOutOfOrder", func(t *testing.T) { testDBEAndDuplicates(t, cp) })
	t.Run("BreakerTripsAt50Nodes", func(t *testing.T) { testBreakerTrips(t, cp) })
	t.Run("DryRunChangesNothing", func(t *testing.T) { testDryRun(t, cp) })
	t.Run("ReturnToService", func(t *testing.T) { testReturnToService(t, cp) })
	t.Run("ForeignCordonLeftAlone", func(t *testing.T) { testForeignCordonLeftAlone(t, cp) })
	t.Run("NotFromCorrelator", func(t *testing.T) { testNotFromCorrelator(t, cp) })
	t.Run("RBACManifests", func(t *testing.T) { testRBAC(t, cp) })
	t.Run("DeviceTaintOneGPU", func(t *testing.T) { testDeviceTaintOneGPU(t, cp) })
	t.Run("RecordToCordonLatency100Nodes", func(t *testing.T) { testRecordToCordonLatency(t, cp) })
	t.Run("GhostNodesDoNotTripTheBreaker", func(t *testing.T) { testGhostNodes(t, cp) })
	t.Run("NodeWithoutGPUNeverQuarantined", func(t *testing.T) { testNoGPUNode(t, cp) })
	t.Run("QuarantinedShareCapOverWindows", func(t *testing.T) { testShareCap(t, cp) })
}

func testDBEAndDuplicates(t *testing.T, cp *controlPlane) {
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "dbe", 1)
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "dbe", "xl003")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	consumeRecords(t, exp, dbe)

	// Synchronous: when ConsumeLogs returns the node is quarantined.
	node := cp.node(t, "xl003")
	assert.True(t, node.Spec.Unschedulable, "cordoned")
	require.Len(t, node.Spec.Taints, 1)
	assert.Equal(t, k8s.DefaultTaintKey, node.Spec.Taints[0].Key)
	assert.Equal(t, "gpu.memory.dbe", node.Spec.Taints[0].Value)
	assert.Equal(t, corev1.TaintEffectNoSchedule, node.Spec.Taints[0].Effect)
	assert.Equal(t, corev1.ConditionFalse, gpuHealthy(node))
	assert.Equal(t, dbe.ID, node.Annotations[k8s.AnnotationFaultID])

	d := hook.deliveries()
	require.Len(t, d, 1, "one P1 page")
	assert.Equal(t, dbe.ID+"/open/notify/P1", d[0].id)
	assert.Equal(t, 2, d[0].attempts, "the first attempt failed, the retry delivered")
	assert.Equal(t, "page", d[0].payload.Route)
	assert.Equal(t, "P1", d[0].payload.Fault.Severity)
	assert.Equal(t, "acted", d[0].payload.Decision.Outcome)
	assert.Equal(t, []string{"cordon", "taint", "condition"}, d[0].payload.Decision.Actions)
	assert.Zero(t, hook.badSignatures())

	acted := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionActed, "xl003"))
	require.Len(t, acted, 1)
	assert.Equal(t, dbe.ID, acted[0].FaultID)
	assert.Equal(t, "kubernetes", acted[0].Platform)
	assert.Equal(t, "applied", acted[0].Outcome)
	assert.Contains(t, acted[0].Reason, "cordoned")

	// The same record again, then an out-of-order update and open: no API
	// write (the node's resourceVersion stays), no new delivery.
	consumeRecords(t, exp, dbe)
	consumeRecords(t, exp, withState(dbe, fault.StateUpdate))
	consumeRecords(t, exp, dbe)
	assert.Equal(t, node.ResourceVersion, cp.node(t, "xl003").ResourceVersion, "nothing written to the node")
	assert.Len(t, hook.deliveries(), 1, "one delivery per fault id and state")
	assert.Len(t, auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionActed, "")), 1)
	assert.Len(t, auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionSkipped, "xl003")), 3,
		"each repeat audited as a duplicate")
}

func testBreakerTrips(t *testing.T, cp *controlPlane) {
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "breaker", 0.1)
	exp := startLeader(t, cfg)
	var names []string
	var recs []fault.Record
	for i := range 50 {
		name := fmt.Sprintf("bk%03d", i)
		names = append(names, name)
		recs = append(recs, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, name, fault.StateOpen))
	}
	cp.createGPUNodes(t, "breaker", names...)

	// A bad switch: 50 nodes at once, in one batch.
	consumeRecords(t, exp, recs...)

	nodes, err := cp.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: poolLabel + "=breaker"})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 50)
	cordoned := 0
	for i := range nodes.Items {
		if nodes.Items[i].Spec.Unschedulable {
			cordoned++
			assert.True(t, quarantined(&nodes.Items[i]))
		}
	}
	assert.Equal(t, 5, cordoned, "max_share 0.1 of 50 GPU nodes")

	cm, err := cp.client.CoreV1().ConfigMaps(k8s.DefaultNamespace).Get(context.Background(), "breaker-breaker", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, cm.Data["state"], `"tripped":true`)

	tripped := hook.deliveriesWith("breaker_tripped")
	require.Len(t, tripped, 1, "one page per trip")
	assert.Equal(t, "page", tripped[0].payload.Route)
	assert.Zero(t, hook.badSignatures())
	assert.Len(t, auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepQuarantine && e.Decision == audit.DecisionSkipped && strings.HasPrefix(e.Reason, "circuit breaker tripped")
	}), 45)
}

func testDryRun(t *testing.T, cp *controlPlane) {
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "dry", 1)
	cfg.DryRun = true
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "dry", "dry001")
	before := cp.node(t, "dry001")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "dry001", fault.StateOpen)
	consumeRecords(t, exp, dbe)

	after := cp.node(t, "dry001")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "nothing written to the node")
	assert.False(t, after.Spec.Unschedulable)
	assert.Empty(t, after.Spec.Taints)
	assert.Empty(t, hook.deliveries(), "dry run posts nothing")
	_, err := cp.client.CoreV1().ConfigMaps(k8s.DefaultNamespace).Get(context.Background(), "breaker-dry", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "dry run does not touch the breaker: %v", err)

	dry := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionDryRun, "dry001"))
	require.Len(t, dry, 1)
	assert.Equal(t, `would call Quarantine on kubernetes: node=dry001 actions=[cordon,taint,condition] reason="gpu.memory.dbe `+
		dbe.ID+`" gpu="GPU-dry001-5"`, dry[0].Reason)
	assert.Len(t, auditEntries(t, cfg.AuditFile, stepDecision(stepWebhook, audit.DecisionDryRun, "dry001")), 1)
}

func testReturnToService(t *testing.T, cp *controlPlane) {
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "rts", 1)
	cfg.VerificationWindow = 200 * time.Millisecond
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "rts", "rts-nvlink", "rts-dbe")

	nvlink := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "rts-nvlink", fault.StateOpen)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "rts-dbe", fault.StateOpen)
	consumeRecords(t, exp, nvlink, dbe)
	require.True(t, quarantined(cp.node(t, "rts-nvlink")))
	require.True(t, quarantined(cp.node(t, "rts-dbe")))

	// The DBE resolves first: it waits for a human, synchronously decided.
	consumeRecords(t, exp, withState(dbe, fault.StateResolved))
	held := auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionSkipped, "rts-dbe"))
	require.Len(t, held, 1)
	assert.Contains(t, held[0].Reason, "waits for a human")

	// The NVLink fault resolves: released after the verification window.
	consumeRecords(t, exp, withState(nvlink, fault.StateResolved))
	n := cp.waitNode(t, "rts-nvlink", "released", func(n *corev1.Node) bool {
		return released(n) && gpuHealthy(n) == corev1.ConditionTrue
	})
	assert.Empty(t, n.Labels[k8s.LabelQuarantined])
	assert.Empty(t, n.Annotations[k8s.AnnotationFaultID])
	require.Eventually(t, func() bool {
		return len(auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "rts-nvlink"))) == 1
	}, 30*time.Second, 10*time.Millisecond, "release audited")

	// The DBE's node, resolved before the NVLink one, is still quarantined
	// after the NVLink node's window passed.
	dbeNode := cp.node(t, "rts-dbe")
	assert.True(t, quarantined(dbeNode), "a resolved DBE waits for a human")
	assert.Equal(t, corev1.ConditionFalse, gpuHealthy(dbeNode))
	assert.Empty(t, auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "rts-dbe")))
	// Resolutions are posted for both faults.
	assert.Len(t, hook.deliveriesWith("notify"), 4, "two opens, two resolutions")
}

func testForeignCordonLeftAlone(t *testing.T, cp *controlPlane) {
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "foreign", 1)
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "foreign", "foreign001")
	// An operator cordons the node for their own reasons.
	n := cp.node(t, "foreign001")
	n.Spec.Unschedulable = true
	n, err := cp.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	require.NoError(t, err)

	consumeRecords(t, exp, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "foreign001", fault.StateOpen))

	after := cp.node(t, "foreign001")
	assert.Equal(t, n.ResourceVersion, after.ResourceVersion, "left exactly as it was")
	assert.True(t, after.Spec.Unschedulable)
	assert.Empty(t, after.Spec.Taints)
	skipped := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionSkipped, "foreign001"))
	require.Len(t, skipped, 1)
	assert.Equal(t, "skip_foreign", skipped[0].Outcome)
	assert.True(t, strings.HasPrefix(skipped[0].Reason, "skip_foreign"), skipped[0].Reason)
	// The page still goes out, saying what was (not) done.
	d := hook.deliveries()
	require.Len(t, d, 1)
	assert.Equal(t, "skipped", d[0].payload.Decision.Outcome)
}

func testNotFromCorrelator(t *testing.T, cp *controlPlane) {
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "forged", 1)
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "forged", "forged001")
	before := cp.node(t, "forged001")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "forged001", fault.StateOpen)
	require.NoError(t, exp.ConsumeLogs(context.Background(), logsOf("github.com/evil/faultcorrelator", dbe)))

	assert.Equal(t, before.ResourceVersion, cp.node(t, "forged001").ResourceVersion)
	assert.Empty(t, hook.deliveries())
	skipped := auditEntries(t, cfg.AuditFile, stepDecision(stepRecord, audit.DecisionSkipped, ""))
	require.Len(t, skipped, 1)
	assert.Contains(t, skipped[0].Reason, "not a correlator record")
	assert.Empty(t, auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool { return e.FaultID == dbe.ID }))
}

// testRecordToCordonLatency measures a fault record handed to ConsumeLogs →
// the node cordoned as a watch on the API server sees it, over 100 DBE
// faults on 100 nodes. It reports; it does not assert a wall-clock limit.
func testRecordToCordonLatency(t *testing.T, cp *controlPlane) {
	const n = 100
	_, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "latency", 1)
	exp := startLeader(t, cfg)
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("lat%03d", i))
	}
	cp.createGPUNodes(t, "latency", names...)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	list, err := cp.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: poolLabel + "=latency"})
	require.NoError(t, err)
	w, err := cp.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		LabelSelector: poolLabel + "=latency", ResourceVersion: list.ResourceVersion,
	})
	require.NoError(t, err)
	defer w.Stop()

	var mu sync.Mutex
	cordonedAt := map[string]time.Time{}
	allSeen := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			node, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type != watch.Modified || !node.Spec.Unschedulable {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, seen := cordonedAt[node.Name]; !seen {
				cordonedAt[node.Name] = now
				if len(cordonedAt) == n {
					close(allSeen)
				}
			}
			mu.Unlock()
		}
	}()

	sentAt := map[string]time.Time{}
	for _, name := range names {
		rec := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, name, fault.StateOpen)
		ld := logsOf(semconv.ScopeFaultRecords, rec)
		sentAt[name] = time.Now()
		require.NoError(t, exp.ConsumeLogs(ctx, ld))
	}
	select {
	case <-allSeen:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("saw %d of %d nodes cordoned", len(cordonedAt), n)
	}

	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, n)
	for _, name := range names {
		lat = append(lat, cordonedAt[name].Sub(sentAt[name]))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[(len(lat)*99+99)/100-1]
	t.Logf("record in (ConsumeLogs) -> node cordoned in the API server (watch), %d DBE faults on %d nodes: min %v, p50 %v, p99 %v, max %v",
		n, n, lat[0], p50, p99, lat[len(lat)-1])
	assert.Len(t, cordonedAt, n)
	assert.Positive(t, p50)
}

// With kubernetes.device_taints on, a DBE on one GPU taints that GPU
// (a DRA DeviceTaintRule) and leaves the node schedulable.
func testDeviceTaintOneGPU(t *testing.T, cp *controlPlane) {
	ctx := context.Background()
	_, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "dra", 1)
	cfg.Kubernetes.DeviceTaints = true
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "dra", "dra003")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "dra003", fault.StateOpen)
	node := "dra003"
	other, faulty := "GPU-dra003-4", dbe.GPUUUID
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "dra003-gpu.nvidia.com"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.nvidia.com", NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{
				{Name: "gpu-4", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"uuid": {StringValue: &other}}},
				{Name: "gpu-5", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"uuid": {StringValue: &faulty}}},
			},
		},
	}
	_, err := cp.client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
	require.NoError(t, err)

	consumeRecords(t, exp, dbe)

	rules, err := cp.client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, rules.Items, 1)
	sel := rules.Items[0].Spec.DeviceSelector
	require.NotNil(t, sel)
	require.NotNil(t, sel.Device)
	assert.Equal(t, "gpu-5", *sel.Device, "exactly the faulty GPU")
	assert.Equal(t, "gpu.memory.dbe", rules.Items[0].Spec.Taint.Value)
	n := cp.node(t, node)
	assert.False(t, n.Spec.Unschedulable, "the node is not cordoned")
	assert.Empty(t, n.Spec.Taints)
	assert.Equal(t, corev1.ConditionFalse, gpuHealthy(n))

	acted := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionActed, node))
	require.Len(t, acted, 1)
	assert.Equal(t, []string{"device_taint", "condition"}, acted[0].Actions)
	assert.Contains(t, acted[0].Reason, "device taint rule")
}
