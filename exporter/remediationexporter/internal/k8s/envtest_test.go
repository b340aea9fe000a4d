//go:build envtest

// These tests run the platform against a real kube-apiserver and etcd
// (controller-runtime's envtest). Build the binaries first:
//
//	tools/envtest/build.sh
//	go test -tags envtest ./exporter/remediationexporter/internal/k8s/
package k8s

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// envtestBinDir is where tools/envtest/build.sh puts kube-apiserver and
// etcd: $ENVTEST_BIN_DIR, or <repo>/.tools/envtest-bin, four levels above
// this package. Missing binaries fail the test: a skipped test would let
// `make test` pass without ever talking to an API server.
func envtestBinDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ENVTEST_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", ".tools", "envtest-bin")
	}
	dir, err := filepath.Abs(dir)
	require.NoError(t, err)
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			t.Fatalf("envtest binary %s missing in %s: run tools/envtest/build.sh (or make envtest-bin) first", bin, dir)
		}
	}
	return dir
}

// startControlPlane starts kube-apiserver and etcd for one test. certDir,
// when set, keeps the API server's serving certificate across a restart.
func startControlPlane(t *testing.T, certDir string) (*envtest.Environment, *rest.Config) {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	useExisting := false
	env := &envtest.Environment{
		BinaryAssetsDirectory: envtestBinDir(t),
		UseExistingCluster:    &useExisting,
		// NVSentinel's janitor CRDs (RebootNode, GPUReset): the repair
		// objects are validated against their real schema.
		CRDDirectoryPaths:     []string{filepath.Join("testdata", "nvsentinel")},
		ErrorIfCRDPathMissing: true,
	}
	if certDir != "" {
		env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certDir}
	}
	cfg, err := env.Start()
	require.NoError(t, err, "start kube-apiserver and etcd")
	t.Cleanup(func() { assert.NoError(t, env.Stop()) })
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	return env, cfg
}

// newClient is one client per replica: separate connections, as two
// gateway pods would have.
func newClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	require.NoError(t, err)
	return client
}

func newPlatform(t *testing.T, client kubernetes.Interface, mutate func(*Config)) *Platform {
	t.Helper()
	cfg := NewDefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(client, cfg, zaptest.NewLogger(t))
	require.NoError(t, err)
	return p
}

func createNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	_, err := client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// createGPUNode creates a node with 8 GPUs of capacity and a Ready
// condition, as a kubelet with the device plugin would register it.
func createGPUNode(t *testing.T, client kubernetes.Interface, name string, mutate func(*corev1.Node)) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if mutate != nil {
		mutate(node)
	}
	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)
	// The TaintNodesByCondition admission plugin marks a new node not-ready
	// until a kubelet reports; there is no kubelet here, so drop it to keep
	// the assertions exact.
	if kept, removed := removeTaintKey(created.Spec.Taints, "node.kubernetes.io/not-ready"); removed {
		created.Spec.Taints = kept
		_, err = client.CoreV1().Nodes().Update(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	// A kubelet's registration leaves managedFields on a real node; this
	// API server starts tracking a node's managers only at its first apply,
	// and Release reads who set the cordon from them (ownership.go).
	created, err = client.CoreV1().Nodes().Patch(ctx, name, types.ApplyPatchType,
		[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+name+`","annotations":{"volumes.kubernetes.io/controller-managed-attach-detach":"true"}}}`),
		metav1.PatchOptions{FieldManager: "kubelet"})
	require.NoError(t, err)
	created.Status.Capacity = corev1.ResourceList{resourceGPU: resource.MustParse("8")}
	created.Status.Allocatable = created.Status.Capacity
	created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	created, err = client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	return created
}

func getNode(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return node
}

func condition(node *corev1.Node, typ string) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if string(node.Status.Conditions[i].Type) == typ {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(node *corev1.Node, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

var quarantineActions = []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}

func dbeRequest(node, faultID string) actuator.Request {
	return actuator.Request{
		Node: node, GPUUUID: "GPU-5", FaultID: faultID, FaultType: "gpu.ecc.dbe", Severity: "P1",
		Reason: "otelcol-gpu: gpu.ecc.dbe " + faultID, Actions: quarantineActions,
	}
}

// TestEnvtest shares one control plane between the scenarios; each uses
// its own nodes and breaker ConfigMap.
func TestEnvtest(t *testing.T) {
	_, cfg := startControlPlane(t, "")
	client := newClient(t, cfg)
	createNamespace(t, client, DefaultNamespace)

	t.Run("DBECordonTaintCondition", func(t *testing.T) { testDBE(t, client) })
	t.Run("AlreadyCordonedBySomeoneElse", func(t *testing.T) { testForeignCordon(t, client) })
	t.Run("MaintenanceAndMissingNode", func(t *testing.T) { testSkips(t, client) })
	t.Run("ConcurrentTaintWriter", func(t *testing.T) { testConcurrentWriter(t, cfg) })
	t.Run("BreakerTripsAt50Nodes", func(t *testing.T) { testBreaker(t, cfg) })
	t.Run("ReleaseOursNotForeign", func(t *testing.T) { testRelease(t, client) })
	t.Run("ReleaseEveryFaultAndEvents", func(t *testing.T) { testReleaseAllAndEvents(t, client) })
	t.Run("DeviceTaintOneGPU", func(t *testing.T) { testDeviceTaint(t, client) })
	t.Run("EvictGPUPods", func(t *testing.T) { testEvict(t, client) })
	t.Run("LeaderElection", func(t *testing.T) { testLeader(t, cfg) })
	t.Run("QuarantineLatency100Nodes", func(t *testing.T) { testLatency(t, cfg) })
	t.Run("CheckBeforeTheBreaker", func(t *testing.T) { testCheck(t, client) })
	t.Run("NoGPUNeverQuarantined", func(t *testing.T) { testNoGPU(t, client) })
	t.Run("BreakerRefund", func(t *testing.T) { testBreakerRefund(t, client) })
	t.Run("BreakerTripByTheQuarantineCap", func(t *testing.T) { testBreakerTrip(t, cfg) })
	t.Run("ReleaseOnlyWhatIsStillOurs", func(t *testing.T) { testReleaseOnlyWhatIsStillOurs(t, client) })
	t.Run("RepairNVSentinelObjects", func(t *testing.T) { testRepairNVSentinel(t, cfg) })
	t.Run("RepairDrained", func(t *testing.T) { testRepairDrained(t, client) })
}

func testDBE(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, nil)
	createGPUNode(t, client, "xl003", nil)

	res, err := p.Quarantine(ctx, dbeRequest("xl003", "f-dbe-1"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)

	node := getNode(t, client, "xl003")
	assert.True(t, node.Spec.Unschedulable)
	require.Len(t, node.Spec.Taints, 1)
	assert.Equal(t, corev1.Taint{Key: DefaultTaintKey, Value: "gpu.ecc.dbe", Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: node.Spec.Taints[0].Key, Value: node.Spec.Taints[0].Value, Effect: node.Spec.Taints[0].Effect})
	assert.Equal(t, "true", node.Labels[LabelQuarantined])
	assert.Equal(t, "f-dbe-1", node.Annotations[AnnotationFaultID])
	assert.Equal(t, Owner, node.Annotations[AnnotationCordonedBy])
	cond := condition(node, DefaultConditionType)
	require.NotNil(t, cond, "GPUHealthy condition written on nodes/status")
	assert.Equal(t, corev1.ConditionFalse, cond.Status)
	assert.Equal(t, "GpuEccDbe", cond.Reason)
	assert.Equal(t, "otelcol-gpu: gpu.ecc.dbe f-dbe-1", cond.Message)
	assert.NotNil(t, condition(node, string(corev1.NodeReady)), "the kubelet's conditions stay")

	// The same fault again changes nothing, not even the resourceVersion.
	res, err = p.Quarantine(ctx, dbeRequest("xl003", "f-dbe-1"))
	require.NoError(t, err)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome, res.Detail)
	assert.Equal(t, node.ResourceVersion, getNode(t, client, "xl003").ResourceVersion)
}

func testForeignCordon(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, nil)
	before := createGPUNode(t, client, "foreign-1", func(n *corev1.Node) {
		n.Spec.Unschedulable = true // a human's kubectl cordon
	})

	res, err := p.Quarantine(ctx, dbeRequest("foreign-1", "f-foreign"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipForeign, res.Outcome, res.Detail)

	after := getNode(t, client, "foreign-1")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "nothing written")
	assert.Empty(t, after.Spec.Taints)
	assert.NotContains(t, after.Labels, LabelQuarantined)
	assert.Nil(t, condition(after, DefaultConditionType))
}

func testSkips(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, nil)
	before := createGPUNode(t, client, "maint-1", func(n *corev1.Node) {
		n.Labels[DefaultMaintenanceLabel] = "bios-update"
	})
	res, err := p.Quarantine(ctx, dbeRequest("maint-1", "f-maint"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipExcluded, res.Outcome, res.Detail)
	assert.Equal(t, before.ResourceVersion, getNode(t, client, "maint-1").ResourceVersion)

	res, err = p.Quarantine(ctx, dbeRequest("no-such-node", "f-missing"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNotFound, res.Outcome)
	res, err = p.Release(ctx, dbeRequest("no-such-node", "f-missing"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNotFound, res.Outcome)
}

// testConcurrentWriter races the platform against another controller that
// adds its own taint by read-modify-write on many nodes at once. With a
// blind replace of spec.taints one of the two would be lost on some node.
func testConcurrentWriter(t *testing.T, cfg *rest.Config) {
	ctx := context.Background()
	ours := newClient(t, cfg)
	theirs := newClient(t, cfg)
	p := newPlatform(t, ours, nil)
	const nodes = 20
	for i := range nodes {
		createGPUNode(t, ours, fmt.Sprintf("race-%02d", i), nil)
	}
	otherTaint := corev1.Taint{Key: "example.com/other-controller", Value: "x", Effect: corev1.TaintEffectNoSchedule}

	start := make(chan struct{})
	var wg sync.WaitGroup
	var theirConflicts atomic.Int64
	errs := make(chan error, 2*nodes)
	for i := range nodes {
		name := fmt.Sprintf("race-%02d", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			res, err := p.Quarantine(ctx, dbeRequest(name, "f-race"))
			if err == nil && res.Outcome != actuator.Applied {
				err = fmt.Errorf("%s: outcome %s", name, res.Outcome)
			}
			errs <- err
		}()
		go func() {
			defer wg.Done()
			<-start
			errs <- retry.RetryOnConflict(retry.DefaultBackoff, func() error {
				node, err := theirs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				node.Spec.Taints = append(node.Spec.Taints, otherTaint)
				_, err = theirs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
				if err != nil {
					theirConflicts.Add(1)
				}
				return err
			})
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for i := range nodes {
		node := getNode(t, ours, fmt.Sprintf("race-%02d", i))
		assert.True(t, hasTaint(node, DefaultTaintKey, corev1.TaintEffectNoSchedule), node.Name)
		assert.True(t, hasTaint(node, otherTaint.Key, otherTaint.Effect), node.Name)
		assert.Len(t, node.Spec.Taints, 2, node.Name)
		assert.True(t, node.Spec.Unschedulable, node.Name)
	}
	t.Logf("the other writer hit %d conflicts", theirConflicts.Load())
}

// testBreaker: a bad switch makes 50 nodes look faulty at once; two
// replicas race to quarantine them; max_share 0.1 allows 5.
func testBreaker(t *testing.T, cfg *rest.Config) {
	ctx := context.Background()
	const nodes, pool = 50, "otelcol-gpu.io/test-pool"
	setup := newClient(t, cfg)
	for i := range nodes {
		createGPUNode(t, setup, fmt.Sprintf("brk-%02d", i), func(n *corev1.Node) { n.Labels[pool] = "breaker" })
	}
	replicaCfg := func(c *Config) {
		c.GPUNodeSelector = pool + "=breaker"
		c.Breaker.MaxShare = 0.1
		c.Breaker.Name = "breaker-50"
	}
	replicas := []*Platform{newPlatform(t, newClient(t, cfg), replicaCfg), newPlatform(t, newClient(t, cfg), replicaCfg)}
	now := time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)

	// What the exporter does per fault: ask the breaker, then act.
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	start := make(chan struct{})
	for i := range nodes {
		p := replicas[i%2]
		name := fmt.Sprintf("brk-%02d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				ok, err := p.Breaker().Admit(ctx, name, now)
				if errors.Is(err, actuator.ErrConflict) {
					continue // the exporter retries the whole call
				}
				if err != nil || !ok {
					refused.Add(1)
					errs <- err
					return
				}
				admitted.Add(1)
				_, err = p.Quarantine(ctx, dbeRequest(name, "f-switch"))
				errs <- err
				return
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	assert.EqualValues(t, 5, admitted.Load())
	assert.EqualValues(t, 45, refused.Load())
	quarantined, err := setup.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelQuarantined + "=true," + pool + "=breaker"})
	require.NoError(t, err)
	assert.Len(t, quarantined.Items, 5, "never more nodes quarantined than the budget")
	for _, p := range replicas {
		tripped, err := p.Breaker().Tripped(ctx)
		require.NoError(t, err)
		assert.True(t, tripped, "both replicas see the breaker tripped")
	}
	cm, err := setup.CoreV1().ConfigMaps(DefaultNamespace).Get(ctx, "breaker-50", metav1.GetOptions{})
	require.NoError(t, err)
	st, err := parseBreakerState(cm.Data[breakerStateKey])
	require.NoError(t, err)
	assert.Len(t, st.Window, 5)

	// A counted node is admitted again (a retried quarantine); a new one
	// is not, even an hour later: tripped stays until a human resets it.
	var counted string
	for n := range st.Window {
		counted = n
	}
	ok, err := replicas[0].Breaker().Admit(ctx, counted, now.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = replicas[1].Breaker().Admit(ctx, "brk-49-new", now.Add(2*time.Hour))
	require.NoError(t, err)
	assert.False(t, ok)

	require.NoError(t, replicas[1].Breaker().Reset(ctx))
	tripped, err := replicas[0].Breaker().Tripped(ctx)
	require.NoError(t, err)
	assert.False(t, tripped)
	ok, err = replicas[0].Breaker().Admit(ctx, "brk-00", now.Add(3*time.Hour))
	require.NoError(t, err)
	assert.True(t, ok)
}

func testRelease(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, nil)

	// Ours, with a foreign taint added later: the foreign taint stays.
	createGPUNode(t, client, "rel-ours", nil)
	_, err := p.Quarantine(ctx, dbeRequest("rel-ours", "f1"))
	require.NoError(t, err)
	res, err := p.Quarantine(ctx, dbeRequest("rel-ours", "f2"))
	require.NoError(t, err)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome)
	foreignTaint := corev1.Taint{Key: "example.com/keep", Effect: corev1.TaintEffectNoSchedule}
	node := getNode(t, client, "rel-ours")
	node.Spec.Taints = append(node.Spec.Taints, foreignTaint)
	_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)

	// f1 resolves, f2 still holds the node.
	res, err = p.Release(ctx, dbeRequest("rel-ours", "f1"))
	require.NoError(t, err)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome, res.Detail)
	node = getNode(t, client, "rel-ours")
	assert.True(t, node.Spec.Unschedulable)
	assert.Equal(t, "f2", node.Annotations[AnnotationFaultID])

	// A fault that never held it releases nothing.
	res, err = p.Release(ctx, dbeRequest("rel-ours", "f-other"))
	require.NoError(t, err)
	assert.Equal(t, actuator.NotOurs, res.Outcome)

	res, err = p.Release(ctx, dbeRequest("rel-ours", "f2"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	node = getNode(t, client, "rel-ours")
	assert.False(t, node.Spec.Unschedulable)
	assert.Equal(t, []corev1.Taint{foreignTaint}, node.Spec.Taints)
	assert.NotContains(t, node.Labels, LabelQuarantined)
	assert.NotContains(t, node.Annotations, AnnotationFaultID)
	assert.NotContains(t, node.Annotations, AnnotationCordonedBy)
	cond := condition(node, DefaultConditionType)
	require.NotNil(t, cond)
	assert.Equal(t, corev1.ConditionTrue, cond.Status)
	assert.Equal(t, ReasonRecovered, cond.Reason)

	// Foreign: cordoned and tainted by someone else; Release leaves it.
	before := createGPUNode(t, client, "rel-foreign", func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		n.Spec.Taints = []corev1.Taint{{Key: DefaultTaintKey, Value: "manual", Effect: corev1.TaintEffectNoSchedule}}
	})
	res, err = p.Release(ctx, dbeRequest("rel-foreign", ""))
	require.NoError(t, err)
	assert.Equal(t, actuator.NotOurs, res.Outcome)
	assert.Equal(t, before.ResourceVersion, getNode(t, client, "rel-foreign").ResourceVersion)

	// We tainted it; a human cordoned it afterwards. Release removes our
	// taint and leaves the human's cordon.
	createGPUNode(t, client, "rel-mixed", nil)
	_, err = p.Quarantine(ctx, actuator.Request{Node: "rel-mixed", FaultID: "f3", FaultType: "gpu.xid.48", Actions: []actuator.Action{actuator.ActionTaint}})
	require.NoError(t, err)
	node = getNode(t, client, "rel-mixed")
	node.Spec.Unschedulable = true
	_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	res, err = p.Release(ctx, dbeRequest("rel-mixed", "f3"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome)
	node = getNode(t, client, "rel-mixed")
	assert.True(t, node.Spec.Unschedulable, "a cordon that is not ours stays")
	assert.Empty(t, node.Spec.Taints)
}

func testEvict(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, func(c *Config) { c.Evict = true })
	disabled := newPlatform(t, client, nil)
	createGPUNode(t, client, "evict-1", nil)
	const ns = "evict-test"
	createNamespace(t, client, ns)

	pod := func(name string, gpus string, labels map[string]string) *corev1.Pod {
		c := corev1.Container{Name: "c", Image: "train:latest"}
		if gpus != "" {
			c.Resources.Limits = corev1.ResourceList{resourceGPU: resource.MustParse(gpus)}
		}
		created, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: "evict-1", Containers: []corev1.Container{c}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return created
	}
	pod("trainer", "8", nil)
	pod("logshipper", "", nil)
	// A pending pod may be evicted whatever its budget says; a running,
	// ready one is guarded.
	guarded := pod("guarded", "1", map[string]string{"app": "guarded"})
	guarded.Status.Phase = corev1.PodRunning
	guarded.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	_, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, guarded, metav1.UpdateOptions{})
	require.NoError(t, err)
	minAvailable := intstr.FromInt32(1)
	_, err = client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	req := dbeRequest("evict-1", "f-evict")
	req.Actions = []actuator.Action{actuator.ActionCordon, actuator.ActionEvict}
	res, err := disabled.Quarantine(ctx, req)
	require.NoError(t, err)
	assert.Contains(t, res.Detail, "eviction disabled")

	res, err = p.Quarantine(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome)
	assert.Contains(t, res.Detail, "evicted 1 GPU pod(s), 1 blocked by a disruption budget")

	// No kubelet here, so an evicted pod is left terminating.
	terminating := func(name string) bool {
		got, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return got.DeletionTimestamp != nil
	}
	assert.True(t, terminating("trainer"))
	assert.False(t, terminating("logshipper"), "pods without GPUs stay")
	assert.False(t, terminating("guarded"), "the disruption budget holds")
}

func testLeader(t *testing.T, cfg *rest.Config) {
	lease := LeaseConfig{Namespace: DefaultNamespace, Name: "leader-test", Duration: 2 * time.Second}
	type change struct {
		who     string
		leading bool
	}
	changes := make(chan change, 16)
	newCandidate := func(id string) *Leader {
		l, err := NewLeader(newClient(t, cfg), lease, id, zaptest.NewLogger(t), func(leading bool) {
			changes <- change{id, leading}
		})
		require.NoError(t, err)
		require.NoError(t, l.Start(context.Background()))
		t.Cleanup(l.Stop)
		return l
	}
	candidates := map[string]*Leader{"a": newCandidate("a"), "b": newCandidate("b")}

	first := <-changes
	require.True(t, first.leading)
	other := "b"
	if first.who == "b" {
		other = "a"
	}
	assert.True(t, candidates[first.who].IsLeader())
	assert.False(t, candidates[other].IsLeader(), "exactly one leads")

	// The leader stops (rolling update); it releases the lease and the
	// other takes over without waiting for it to expire.
	candidates[first.who].Stop()
	assert.False(t, candidates[first.who].IsLeader())
	assert.Equal(t, change{first.who, false}, <-changes)
	assert.Equal(t, change{other, true}, <-changes)
	assert.True(t, candidates[other].IsLeader())
}

// testLatency quarantines 100 nodes one after another (cordon, taint,
// condition) and reports p50/p99 of the call.
func testLatency(t *testing.T, cfg *rest.Config) {
	ctx := context.Background()
	// The nodes are created through another client, so that the
	// platform's client-side rate limiter starts with a full bucket.
	setupCfg := rest.CopyConfig(cfg)
	setupCfg.QPS, setupCfg.Burst = 1000, 1000
	setup := newClient(t, setupCfg)
	const nodes = 100
	for i := range nodes {
		createGPUNode(t, setup, fmt.Sprintf("lat-%03d", i), nil)
	}
	// The production client allows 50 requests/s after a burst of 100,
	// about 16 quarantines/s sustained; this measures the API server path,
	// not that limiter.
	client := newClient(t, setupCfg)
	p := newPlatform(t, client, nil)
	latencies := make([]time.Duration, 0, nodes)
	for i := range nodes {
		name := fmt.Sprintf("lat-%03d", i)
		begin := time.Now()
		res, err := p.Quarantine(ctx, dbeRequest(name, "f-lat"))
		latencies = append(latencies, time.Since(begin))
		require.NoError(t, err)
		require.Equal(t, actuator.Applied, res.Outcome)
	}
	cordoned, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelQuarantined + "=true"})
	require.NoError(t, err)
	n := 0
	for _, node := range cordoned.Items {
		if node.Spec.Unschedulable && len(node.Name) == 7 && node.Name[:4] == "lat-" {
			n++
		}
	}
	assert.Equal(t, nodes, n)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	t.Logf("Quarantine latency over %d nodes (get+update+updateStatus): p50 %v, p99 %v, max %v",
		nodes, latencies[nodes/2], latencies[nodes*99/100], latencies[nodes-1])
}

// TestAPIServerDownAndBack stops the API server (etcd stays), checks that
// calls fail with an error the exporter retries, restarts it on the same
// port and certificate, and checks the same calls then succeed.
func TestAPIServerDownAndBack(t *testing.T) {
	env, cfg := startControlPlane(t, t.TempDir())
	client := newClient(t, cfg)
	createNamespace(t, client, DefaultNamespace)
	createGPUNode(t, client, "flaky-1", nil)
	p := newPlatform(t, client, nil)
	ctx := context.Background()
	now := time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)

	apiServer := env.ControlPlane.GetAPIServer()
	require.NoError(t, apiServer.Stop())

	res, err := p.Quarantine(ctx, dbeRequest("flaky-1", "f-flaky"))
	require.Error(t, err, "API server down")
	assert.False(t, errors.Is(err, actuator.ErrConflict))
	assert.Empty(t, res.Outcome)
	_, err = p.Breaker().Admit(ctx, "flaky-1", now)
	require.Error(t, err)

	require.NoError(t, apiServer.Start())

	ok, err := p.Breaker().Admit(ctx, "flaky-1", now)
	require.NoError(t, err)
	assert.True(t, ok)
	res, err = p.Quarantine(ctx, dbeRequest("flaky-1", "f-flaky"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome)
	assert.True(t, getNode(t, client, "flaky-1").Spec.Unschedulable)
}

// nodeEvents are the events.k8s.io/v1 Events regarding node, oldest first.
func nodeEvents(t *testing.T, client kubernetes.Interface, node string) []eventsv1.Event {
	t.Helper()
	list, err := client.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: "regarding.kind=Node,regarding.name=" + node,
	})
	require.NoError(t, err)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
	return list.Items
}

// The exporter releases a node with every fault it holds it for; each
// quarantine and the release leave an Event on the Node.
func testReleaseAllAndEvents(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, nil)
	node := createGPUNode(t, client, "ev-1", nil)

	res, err := p.Quarantine(ctx, dbeRequest("ev-1", "f-ev-a"))
	require.NoError(t, err)
	require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	second := dbeRequest("ev-1", "f-ev-b")
	second.FaultType, second.GPUUUID = "nvlink.degraded", "GPU-6"
	res, err = p.Quarantine(ctx, second)
	require.NoError(t, err)
	require.Equal(t, actuator.AlreadyDone, res.Outcome, res.Detail)
	// A repeat of a fault already recorded writes no event.
	_, err = p.Quarantine(ctx, second)
	require.NoError(t, err)

	events := nodeEvents(t, client, "ev-1")
	require.Len(t, events, 2)
	for i, want := range []struct{ typ, id, gpu string }{{"gpu.ecc.dbe", "f-ev-a", "GPU-5"}, {"nvlink.degraded", "f-ev-b", "GPU-6"}} {
		ev := events[i]
		assert.Equal(t, EventReasonQuarantined, ev.Reason)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Equal(t, "Quarantine", ev.Action)
		assert.Equal(t, EventReportingController, ev.ReportingController)
		assert.Equal(t, node.UID, ev.Regarding.UID)
		assert.Contains(t, ev.Note, want.typ+" "+want.id)
		assert.Contains(t, ev.Note, want.gpu)
	}

	// Release with both ids (the exporter's resolved faults) in one call.
	res, err = p.Release(ctx, actuator.Request{Node: "ev-1", FaultID: "f-ev-a", FaultIDs: []string{"f-ev-b", "f-ev-a"}, Reason: "resolved"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	after := getNode(t, client, "ev-1")
	assert.False(t, after.Spec.Unschedulable)
	assert.NotContains(t, after.Labels, LabelQuarantined)
	assert.NotContains(t, after.Annotations, AnnotationFaultID)

	events = nodeEvents(t, client, "ev-1")
	require.Len(t, events, 3)
	released := events[2]
	assert.Equal(t, EventReasonReleased, released.Reason)
	assert.Equal(t, corev1.EventTypeNormal, released.Type)
	assert.Contains(t, released.Note, "f-ev-b,f-ev-a")
	assert.Contains(t, released.Note, "uncordoned")
}

// createGPUSlice publishes node's GPUs as NVIDIA's DRA driver would: one
// ResourceSlice, one device per GPU with its uuid attribute.
func createGPUSlice(t *testing.T, client kubernetes.Interface, node string, uuids ...string) {
	t.Helper()
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.nvidia.com",
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: &node,
		},
	}
	for i := range uuids {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{UUIDAttribute: {StringValue: &uuids[i]}},
		})
	}
	_, err := client.ResourceV1().ResourceSlices().Create(context.Background(), slice, metav1.CreateOptions{})
	require.NoError(t, err)
}

func deviceTaintRequest(node, uuid, faultID string) actuator.Request {
	return actuator.Request{Node: node, GPUUUID: uuid, FaultID: faultID, FaultType: "gpu.memory.dbe", Severity: "P1",
		Reason: "gpu.memory.dbe " + faultID, Actions: []actuator.Action{actuator.ActionDeviceTaint, actuator.ActionCondition}}
}

func deviceTaintRules(t *testing.T, client kubernetes.Interface) []resourcev1.DeviceTaintRule {
	t.Helper()
	list, err := client.ResourceV1().DeviceTaintRules().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return list.Items
}

func testDeviceTaint(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, func(c *Config) { c.DeviceTaints = true })
	createGPUNode(t, client, "dra-1", nil)
	createGPUSlice(t, client, "dra-1", "GPU-aaaa", "GPU-bbbb")

	res, err := p.Quarantine(ctx, deviceTaintRequest("dra-1", "GPU-bbbb", "f-dra-1"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	assert.Contains(t, res.Detail, "device taint rule")

	rules := deviceTaintRules(t, client)
	require.Len(t, rules, 1)
	sel := rules[0].Spec.DeviceSelector
	require.NotNil(t, sel)
	require.NotNil(t, sel.Driver)
	require.NotNil(t, sel.Pool)
	require.NotNil(t, sel.Device)
	assert.Equal(t, "gpu.nvidia.com", *sel.Driver)
	assert.Equal(t, "dra-1", *sel.Pool)
	assert.Equal(t, "gpu-1", *sel.Device, "exactly the GPU with the faulty UUID")
	assert.Equal(t, DefaultTaintKey, rules[0].Spec.Taint.Key)
	assert.Equal(t, resourcev1.DeviceTaintEffectNoSchedule, rules[0].Spec.Taint.Effect)
	assert.Equal(t, "dra-1", rules[0].Annotations[AnnotationNode])

	node := getNode(t, client, "dra-1")
	assert.False(t, node.Spec.Unschedulable, "the node is not cordoned")
	assert.Empty(t, node.Spec.Taints, "the node is not tainted")
	assert.Equal(t, "true", node.Labels[LabelQuarantined], "the exporter holds a fault on it")
	require.NotNil(t, condition(node, DefaultConditionType))

	// A second fault on the same GPU finds the rule.
	res, err = p.Quarantine(ctx, deviceTaintRequest("dra-1", "GPU-bbbb", "f-dra-2"))
	require.NoError(t, err)
	assert.Len(t, deviceTaintRules(t, client), 1)

	// Release removes the rule with the node's quarantine.
	res, err = p.Release(ctx, actuator.Request{Node: "dra-1", FaultIDs: []string{"f-dra-1", "f-dra-2"}, Reason: "resolved"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	assert.Contains(t, res.Detail, "removed 1 device taint rule(s)")
	assert.Empty(t, deviceTaintRules(t, client))
	assert.NotContains(t, getNode(t, client, "dra-1").Labels, LabelQuarantined)

	// A GPU no ResourceSlice publishes: the node actions stand in.
	createGPUNode(t, client, "dra-2", nil)
	res, err = p.Quarantine(ctx, deviceTaintRequest("dra-2", "GPU-not-published", "f-dra-3"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	assert.Contains(t, res.Detail, "no ResourceSlice device on node dra-2")
	node = getNode(t, client, "dra-2")
	assert.True(t, node.Spec.Unschedulable, "fallback cordons")
	assert.True(t, hasTaint(node, DefaultTaintKey, corev1.TaintEffectNoSchedule), "fallback taints")
	assert.Empty(t, deviceTaintRules(t, client))
}

// Without the DeviceTaintRule API (resource disabled in the API server),
// a device taint falls back to cordon and taint.
func TestDeviceTaintAPIUnavailable(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	useExisting := false
	env := &envtest.Environment{BinaryAssetsDirectory: envtestBinDir(t), UseExistingCluster: &useExisting}
	env.ControlPlane.GetAPIServer().Configure().Append("runtime-config", "resource.k8s.io/v1/devicetaintrules=false")
	cfg, err := env.Start()
	require.NoError(t, err, "start kube-apiserver and etcd")
	t.Cleanup(func() { assert.NoError(t, env.Stop()) })
	client := newClient(t, cfg)
	createNamespace(t, client, DefaultNamespace)

	ctx := context.Background()
	p := newPlatform(t, client, func(c *Config) { c.DeviceTaints = true })
	createGPUNode(t, client, "nodra-1", nil)
	createGPUSlice(t, client, "nodra-1", "GPU-cccc", "GPU-dddd")

	res, err := p.Quarantine(ctx, deviceTaintRequest("nodra-1", "GPU-dddd", "f-nodra"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	assert.Contains(t, res.Detail, "DeviceTaintRules (resource.k8s.io/v1) unavailable")
	node := getNode(t, client, "nodra-1")
	assert.True(t, node.Spec.Unschedulable, "fallback cordons")
	assert.True(t, hasTaint(node, DefaultTaintKey, corev1.TaintEffectNoSchedule))

	// Release copes with the missing API too.
	res, err = p.Release(ctx, actuator.Request{Node: "nodra-1", FaultID: "f-nodra", Reason: "resolved"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	assert.False(t, getNode(t, client, "nodra-1").Spec.Unschedulable)
}
