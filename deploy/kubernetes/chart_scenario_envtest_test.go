//go:build envtest

package kubernetes

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// checkScenario holds the objects of a scenario to what its values say:
// the agent alone in the standalone scenario (checkStandalone), else the
// agent, the gateway and the monitoring objects.
func checkScenario(t *testing.T, objs []*unstructured.Unstructured, overlay string) {
	t.Helper()
	if overlay == standaloneScenario {
		checkStandalone(t, objs)
		return
	}
	checkAgent(t, objs, overlay)
	checkGateway(t, objs, overlay)
	checkMonitoring(t, objs, overlay)
}
