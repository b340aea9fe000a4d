package loadtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The harness runs the gateway as the base deployment does: one core's
// GOMAXPROCS (from its CPU request of 1), its GOGC and GOMEMLIMIT.
func TestDeployedRuntimeOfTheBaseGateway(t *testing.T) {
	env, err := DeployedRuntime(filepath.Join("..", "..", "deploy", "kubernetes", "rendered", "gateway-statefulset.yaml"), "gateway")
	require.NoError(t, err)
	assert.Equal(t, GoRuntime{"GOMAXPROCS=1", "GOGC=200", "GOMEMLIMIT=1658MiB"}, env)
}

// And the agent as the base DaemonSet does.
func TestDeployedRuntimeOfTheBaseAgent(t *testing.T) {
	env, err := DeployedRuntime(filepath.Join("..", "..", "deploy", "kubernetes", "rendered", "agent-daemonset.yaml"), "agent")
	require.NoError(t, err)
	assert.Equal(t, GoRuntime{"GOMAXPROCS=1", "GOMEMLIMIT=138MiB"}, env)
}

func writeStatefulSet(t *testing.T, container string) string {
	path := filepath.Join(t.TempDir(), "sts.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: gw}
spec:
  template:
    spec:
      containers:
`+container), 0o600))
	return path
}

func TestDeployedRuntimeRoundsTheCPURequestUp(t *testing.T) {
	path := writeStatefulSet(t, `        - name: gateway
          env:
            - {name: KAFKA_BROKERS, value: "k:9092"}
            - {name: GOGC, value: "150"}
            - name: GOMAXPROCS
              valueFrom:
                resourceFieldRef: {resource: requests.cpu, divisor: "1"}
          resources:
            requests: {cpu: 2500m}
`)
	env, err := DeployedRuntime(path, "gateway")
	require.NoError(t, err)
	assert.Equal(t, GoRuntime{"GOGC=150", "GOMAXPROCS=3"}, env, "only runtime variables; 2.5 cores is 3")
}

func TestDeployedRuntimeErrors(t *testing.T) {
	for name, tc := range map[string]struct{ container, want string }{
		"no such container": {`        - name: agent
`, `StatefulSet has no container "gateway"`},
		"no CPU request": {`        - name: gateway
          env:
            - name: GOMAXPROCS
              valueFrom:
                resourceFieldRef: {resource: requests.cpu}
`, "GOMAXPROCS: resourceFieldRef requests.cpu: the container sets none"},
		"from a ConfigMap": {`        - name: gateway
          env:
            - name: GOMEMLIMIT
              valueFrom:
                configMapKeyRef: {name: rt, key: mem}
`, "GOMEMLIMIT: only literal values and resourceFieldRef are read"},
		"not YAML": {`        - name: [gateway
`, "error converting YAML to JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DeployedRuntime(writeStatefulSet(t, tc.container), "gateway")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "sts.yaml", "names the file")
		})
	}
}

// A variable the harness's environment sets wins over the deployment's,
// and the report shows what the gateway ran with.
func TestRuntimeEnvLetsTheEnvironmentWin(t *testing.T) {
	for _, name := range goRuntimeVars {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	t.Setenv("GOMEMLIMIT", "8GiB")
	r := GoRuntime{"GOMAXPROCS=1", "GOMEMLIMIT=3300MiB"}
	assert.Equal(t, []string{"GOMAXPROCS=1"}, r.added())
	assert.Equal(t, []string{"GOMEMLIMIT=8GiB", "GOMAXPROCS=1"}, r.Env())
}
