package kubernetes

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// agentQueueConfig is what TestAgentQueueOnSizeLimitedVolume reads of the
// agent's config: the Kafka queue's storage and bounds, and the OTLP
// request limits.
type agentQueueConfig struct {
	Extensions struct {
		Queue struct {
			Directory  string `json:"directory"`
			MaxSize    int64  `json:"max_size"`
			Compaction struct {
				Directory      string `json:"directory"`
				OnStart        bool   `json:"on_start"`
				OnRebound      bool   `json:"on_rebound"`
				CleanupOnStart bool   `json:"cleanup_on_start"`
				NeededMiB      int64  `json:"rebound_needed_threshold_mib"`
				TriggerMiB     int64  `json:"rebound_trigger_threshold_mib"`
			} `json:"compaction"`
		} `json:"file_storage/queue"`
		NCCLFlight struct {
			Directory string `json:"directory"`
		} `json:"file_storage/ncclflight"`
	} `json:"extensions"`
	Receivers struct {
		OTLP struct {
			Protocols struct {
				GRPC struct {
					MaxRecvMsgSizeMiB string `json:"max_recv_msg_size_mib"`
				} `json:"grpc"`
				HTTP struct {
					MaxRequestBodySize string `json:"max_request_body_size"`
				} `json:"http"`
			} `json:"protocols"`
		} `json:"otlp"`
	} `json:"receivers"`
	Exporters struct {
		Kafka struct {
			SendingQueue struct {
				Storage   string `json:"storage"`
				Sizer     string `json:"sizer"`
				QueueSize int64  `json:"queue_size"`
			} `json:"sending_queue"`
		} `json:"kafka"`
	} `json:"exporters"`
}

var envRef = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)

// expandEnv resolves ${env:NAME:-default} as the collector does, with the
// container's env (literal values only) over the defaults.
func expandEnv(s string, c corev1.Container) string {
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		for _, e := range c.Env {
			if e.Name == m[1] && e.ValueFrom == nil {
				return e.Value
			}
		}
		return m[2]
	})
}

// mountFor is the volume of the deepest mount of c that holds dir.
func mountFor(t *testing.T, pod corev1.PodSpec, c corev1.Container, dir string) corev1.Volume {
	t.Helper()
	best := -1
	for i, m := range c.VolumeMounts {
		if (dir == m.MountPath || strings.HasPrefix(dir, m.MountPath+"/")) &&
			(best < 0 || len(m.MountPath) > len(c.VolumeMounts[best].MountPath)) {
			best = i
		}
	}
	require.GreaterOrEqual(t, best, 0, "%s: %s is on no volume (the read-only root filesystem)", c.Name, dir)
	v := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[best].Name })
	require.GreaterOrEqual(t, v, 0, "no volume %s", c.VolumeMounts[best].Name)
	return pod.Volumes[v]
}

// TestAgentQueueOnSizeLimitedVolume (issue 19): the agent's Kafka queue
// lives on an emptyDir whose sizeLimit holds the queues' bbolt files (one
// per signal) at their max_size plus the compaction's copy of one, never on the node's root disk
// through the state hostPath; the queue is capped in bytes below that file
// size, compacted, and OTLP requests are capped.
func TestAgentQueueOnSizeLimitedVolume(t *testing.T) {
	// The chart's defaults, as every values file keeps the queue.
	objs := helmTemplate(t, scenarioByName(t, defaultScenario))
	ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent")
	pod := ds.Spec.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == "agent" })
	require.GreaterOrEqual(t, i, 0)
	agent := pod.Containers[i]

	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-agent-config")
	var cfg agentQueueConfig
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg))
	q := cfg.Extensions.Queue
	sq := cfg.Exporters.Kafka.SendingQueue

	dir := expandEnv(q.Directory, agent)
	require.NotEmpty(t, dir)
	vol := mountFor(t, pod, agent, dir)
	require.NotNil(t, vol.EmptyDir, "the queue's directory %s is on volume %s, not an emptyDir", dir, vol.Name)
	require.NotNil(t, vol.EmptyDir.SizeLimit, "emptyDir %s has no sizeLimit", vol.Name)
	assert.Empty(t, vol.EmptyDir.Medium, "on disk, not in the container's memory")
	assert.Equal(t, vol.Name, mountFor(t, pod, agent, expandEnv(q.Compaction.Directory, agent)).Name,
		"compaction's temporary file on the same limited volume")

	// The bounds, innermost first: queue bytes <= bbolt file <= volume.
	assert.Equal(t, "file_storage/queue", sq.Storage)
	assert.Equal(t, "bytes", sq.Sizer, "the queue is capped in bytes")
	require.Positive(t, sq.QueueSize)
	require.Positive(t, q.MaxSize, "file_storage/queue::max_size caps bbolt's file")
	assert.LessOrEqual(t, sq.QueueSize, q.MaxSize/2, "room in the file for bbolt's pages and freelist")
	// One queue and one file per signal the kafka exporter sends, and a
	// compaction copies one file at a time.
	const signals = 3
	assert.GreaterOrEqual(t, vol.EmptyDir.SizeLimit.Value(), (signals+1)*q.MaxSize,
		"sizeLimit %s holds %d files and a compaction copy of one ((%d+1) x %d)", vol.EmptyDir.SizeLimit, signals, signals, q.MaxSize)
	assert.True(t, q.Compaction.OnStart)
	assert.True(t, q.Compaction.OnRebound)
	assert.True(t, q.Compaction.CleanupOnStart, "a compaction killed halfway must not leave its copy on the volume")
	assert.Less(t, q.Compaction.TriggerMiB, q.Compaction.NeededMiB)
	assert.LessOrEqual(t, q.Compaction.NeededMiB<<20, q.MaxSize)

	// The read offsets stay on the host: a rollout must not re-read dumps.
	state := mountFor(t, pod, agent, expandEnv(cfg.Extensions.NCCLFlight.Directory, agent))
	assert.NotNil(t, state.HostPath, "ncclflight offsets on volume %s", state.Name)

	// OTLP requests are bounded (the defaults of the env references).
	assert.Equal(t, "4", expandEnv(cfg.Receivers.OTLP.Protocols.GRPC.MaxRecvMsgSizeMiB, agent))
	assert.Equal(t, "4194304", expandEnv(cfg.Receivers.OTLP.Protocols.HTTP.MaxRequestBodySize, agent))
}
