//go:build envtest

package k8s

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// kubectlCordon patches spec.unschedulable as kubectl cordon and uncordon
// do, under their field managers: a human's hand on the node.
func kubectlCordon(t *testing.T, client kubernetes.Interface, node string, cordon bool) {
	t.Helper()
	patch, manager := `{"spec":{"unschedulable":true}}`, "kubectl-cordon"
	if !cordon {
		patch, manager = `{"spec":{"unschedulable":null}}`, "kubectl-uncordon"
	}
	_, err := client.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: manager})
	require.NoError(t, err)
}

// humanUpdate changes node as kubectl edit would.
func humanUpdate(t *testing.T, client kubernetes.Interface, name string, mutate func(*corev1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := getNode(t, client, name)
		mutate(node)
		_, err := client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	})
	require.NoError(t, err)
}

// assertReleasedMarks: none of our marks is left on the node.
func assertReleasedMarks(t *testing.T, node *corev1.Node) {
	t.Helper()
	assert.NotContains(t, node.Labels, LabelQuarantined)
	for _, a := range []string{AnnotationFaultID, AnnotationCordonedBy, AnnotationTaint} {
		assert.NotContains(t, node.Annotations, a)
	}
	assert.False(t, hasTaint(node, DefaultTaintKey, corev1.TaintEffectNoSchedule), "our taint removed")
}

// Release undoes only what is still as we wrote it (ownership.go).
func testReleaseOnlyWhatIsStillOurs(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, nil)
	quarantine := func(name, id string) {
		t.Helper()
		createGPUNode(t, client, name, nil)
		res, err := p.Quarantine(ctx, dbeRequest(name, id))
		require.NoError(t, err)
		require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		node := getNode(t, client, name)
		require.True(t, node.Spec.Unschedulable)
		require.Equal(t, "otelcol-gpu.io/gpu-fault=gpu.ecc.dbe:NoSchedule", node.Annotations[AnnotationTaint])
	}

	t.Run("PlainCordonReleased", func(t *testing.T) {
		quarantine("own-plain", "f-plain")
		res, err := p.Release(ctx, dbeRequest("own-plain", "f-plain"))
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		assert.Contains(t, res.Detail, "uncordoned")
		node := getNode(t, client, "own-plain")
		assert.False(t, node.Spec.Unschedulable)
		assertReleasedMarks(t, node)
		assert.Equal(t, corev1.ConditionTrue, condition(node, DefaultConditionType).Status)
	})

	t.Run("HumanUncordonedThenCordonedAgain", func(t *testing.T) {
		quarantine("own-recordon", "f-recordon")
		kubectlCordon(t, client, "own-recordon", false)
		kubectlCordon(t, client, "own-recordon", true) // the human's own reasons
		node := getNode(t, client, "own-recordon")
		require.Equal(t, Owner, node.Annotations[AnnotationCordonedBy], "our mark outlived our cordon")

		// The cordon is theirs now: a new fault leaves the node alone.
		got, err := p.Check(ctx, dbeRequest("own-recordon", "f-new"))
		require.NoError(t, err)
		assert.Equal(t, actuator.SkipForeign, got.Skip, got.Detail)

		res, err := p.Release(ctx, dbeRequest("own-recordon", "f-recordon"))
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		assert.NotContains(t, res.Detail, "uncordoned")
		assert.Contains(t, res.Detail, "cordon kept")
		node = getNode(t, client, "own-recordon")
		assert.True(t, node.Spec.Unschedulable, "the human's cordon stays")
		assertReleasedMarks(t, node)
		assert.Equal(t, corev1.ConditionTrue, condition(node, DefaultConditionType).Status, "our condition is reset")
	})

	t.Run("HumanUncordoned", func(t *testing.T) {
		quarantine("own-uncordon", "f-uncordon")
		kubectlCordon(t, client, "own-uncordon", false)
		res, err := p.Release(ctx, dbeRequest("own-uncordon", "f-uncordon"))
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		assert.NotContains(t, res.Detail, "uncordoned")
		node := getNode(t, client, "own-uncordon")
		assert.False(t, node.Spec.Unschedulable)
		assertReleasedMarks(t, node)
	})

	t.Run("HumanRemovedOurTaint", func(t *testing.T) {
		quarantine("own-untaint", "f-untaint")
		theirs := []corev1.Taint{
			{Key: "example.com/keep", Effect: corev1.TaintEffectNoSchedule},
			// Their own taint under our key, another effect: theirs too.
			{Key: DefaultTaintKey, Value: "manual", Effect: corev1.TaintEffectPreferNoSchedule},
		}
		humanUpdate(t, client, "own-untaint", func(n *corev1.Node) { n.Spec.Taints = theirs })
		res, err := p.Release(ctx, dbeRequest("own-untaint", "f-untaint"))
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		assert.Contains(t, res.Detail, "uncordoned")
		assert.NotContains(t, res.Detail, "removed taint")
		node := getNode(t, client, "own-untaint")
		assert.False(t, node.Spec.Unschedulable, "our cordon is lifted")
		assert.Equal(t, theirs, node.Spec.Taints, "nothing re-added, nothing of theirs removed")
		assertReleasedMarks(t, &corev1.Node{ObjectMeta: node.ObjectMeta})
	})

	t.Run("ConditionSetAgainBySomeoneElse", func(t *testing.T) {
		quarantine("own-cond", "f-cond")
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node := getNode(t, client, "own-cond")
			setCondition(&node.Status, corev1.NodeCondition{Type: DefaultConditionType, Status: corev1.ConditionFalse, Reason: "FieldDiagnostics"})
			_, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{FieldManager: "gpu-diag"})
			return err
		})
		require.NoError(t, err)
		res, err := p.Release(ctx, dbeRequest("own-cond", "f-cond"))
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		node := getNode(t, client, "own-cond")
		assert.False(t, node.Spec.Unschedulable)
		cond := condition(node, DefaultConditionType)
		require.NotNil(t, cond)
		assert.Equal(t, corev1.ConditionFalse, cond.Status, "their condition stays")
		assert.Equal(t, "FieldDiagnostics", cond.Reason)
	})
}
