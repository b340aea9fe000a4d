package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// Strimzi's custom resources, as far as these tests read them.
type kafkaTopic struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		TopicName  string         `json:"topicName"`
		Partitions int            `json:"partitions"`
		Replicas   int            `json:"replicas"`
		Config     map[string]any `json:"config"`
	} `json:"spec"`
}

type kafkaUser struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Authentication struct {
			Type string `json:"type"`
		} `json:"authentication"`
		Authorization struct {
			ACLs []struct {
				Resource struct {
					Type        string `json:"type"`
					Name        string `json:"name"`
					PatternType string `json:"patternType"`
				} `json:"resource"`
				Operations []string `json:"operations"`
			} `json:"acls"`
		} `json:"authorization"`
	} `json:"spec"`
}

type kafkaListener struct {
	Name           string `json:"name"`
	Port           int    `json:"port"`
	Type           string `json:"type"`
	TLS            bool   `json:"tls"`
	Authentication *struct {
		Type string `json:"type"`
	} `json:"authentication"`
}

type kafkaCluster struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Kafka struct {
			Listeners []kafkaListener `json:"listeners"`
			Config    map[string]any  `json:"config"`
		} `json:"kafka"`
	} `json:"spec"`
}

// clusterCASecret is the Secret in which Strimzi publishes the cluster CA
// certificate (key ca.crt) that signs the brokers' certificates.
func (k kafkaCluster) clusterCASecret() string {
	return k.Metadata.Name + "-cluster-ca-cert"
}

// scramTLSListener is the internal listener with TLS and SCRAM-SHA-512, the
// one the production collectors use.
func (k kafkaCluster) scramTLSListener(t *testing.T) kafkaListener {
	t.Helper()
	i := slices.IndexFunc(k.Spec.Kafka.Listeners, func(l kafkaListener) bool {
		return l.Type == "internal" && l.TLS && l.Authentication != nil && l.Authentication.Type == "scram-sha-512"
	})
	require.GreaterOrEqual(t, i, 0, "Kafka %s has no internal TLS listener with scram-sha-512", k.Metadata.Name)
	return k.Spec.Kafka.Listeners[i]
}

// readStrimziKafka reads the Kafka of deploy/kafka/strimzi/kafka.yaml.
func readStrimziKafka(t *testing.T) kafkaCluster {
	t.Helper()
	var found []kafkaCluster
	for _, doc := range readDocs[map[string]any](t, filepath.Join("..", "kafka", "strimzi", "kafka.yaml")) {
		if doc["kind"] != "Kafka" {
			continue
		}
		b, err := yaml.Marshal(doc)
		require.NoError(t, err)
		var k kafkaCluster
		require.NoError(t, yaml.Unmarshal(b, &k))
		found = append(found, k)
	}
	require.Len(t, found, 1, "one Kafka in kafka.yaml")
	return found[0]
}

// readStrimziUsers reads deploy/kafka/strimzi/users.yaml by user name.
func readStrimziUsers(t *testing.T) map[string]kafkaUser {
	t.Helper()
	users := map[string]kafkaUser{}
	for _, u := range readDocs[kafkaUser](t, filepath.Join("..", "kafka", "strimzi", "users.yaml")) {
		require.Equal(t, "KafkaUser", u.Kind)
		users[u.Metadata.Name] = u
	}
	return users
}

// kafkaMaxMessageBytes is Kafka's default message.max.bytes, which the
// example states on the broker and on every topic.
const kafkaMaxMessageBytes = 1048588

// collectorKafka is what a collector config says about Kafka: the topics
// it writes and reads, its consumer groups, its producers' message limits.
// readWrites are topics named by a component other than the kafka
// receiver and exporter (remediation's decision log), which it both
// writes and reads back.
type collectorKafka struct {
	produces, consumes, readWrites, groups []string
	maxMessageBytes                        []int
}

// kafkaReceiverDefaultGroup is the kafka receiver's group_id when the
// config sets none.
const kafkaReceiverDefaultGroup = "otel-collector"

// isKafka: a component of type kafka (kafka or kafka/<name>).
func isKafka(id string) bool { return id == "kafka" || strings.HasPrefix(id, "kafka/") }

func readCollectorKafka(t *testing.T, distribution string) collectorKafka {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "distributions", distribution, "config.yaml"))
	require.NoError(t, err)
	var cfg struct {
		Receivers  map[string]map[string]any `json:"receivers"`
		Exporters  map[string]map[string]any `json:"exporters"`
		Extensions map[string]map[string]any `json:"extensions"`
		Connectors map[string]map[string]any `json:"connectors"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	var k collectorKafka
	signalTopics := func(c map[string]any, key string) []string {
		var topics []string
		if topic, ok := c[key].(string); ok {
			topics = append(topics, topic)
		}
		for _, signal := range []string{"metrics", "logs", "traces"} {
			s, _ := c[signal].(map[string]any)
			if topic, ok := s["topic"].(string); ok {
				topics = append(topics, topic)
			}
			list, _ := s["topics"].([]any)
			for _, topic := range list {
				topics = append(topics, fmt.Sprint(topic))
			}
		}
		return topics
	}
	for name, exp := range cfg.Exporters {
		if !isKafka(name) {
			continue
		}
		k.produces = append(k.produces, signalTopics(exp, "topic")...)
		producer, _ := exp["producer"].(map[string]any)
		maxBytes, ok := producer["max_message_bytes"].(float64)
		require.True(t, ok, "%s: exporter %s sets no producer.max_message_bytes", distribution, name)
		k.maxMessageBytes = append(k.maxMessageBytes, int(maxBytes))
	}
	for name, rcv := range cfg.Receivers {
		if !isKafka(name) {
			continue
		}
		g, ok := rcv["group_id"].(string)
		if !ok {
			g = kafkaReceiverDefaultGroup
		}
		k.groups = append(k.groups, g)
		k.consumes = append(k.consumes, signalTopics(rcv, "topic")...)
	}
	// Kafka named anywhere else: a group_id, or a topic under a key named
	// topic or *_topic.
	for kind, components := range map[string]map[string]map[string]any{
		"receiver": cfg.Receivers, "exporter": cfg.Exporters, "extension": cfg.Extensions, "connector": cfg.Connectors,
	} {
		for name, c := range components {
			if isKafka(name) && (kind == "receiver" || kind == "exporter") {
				continue
			}
			walkStrings(c, "", func(key, value string) {
				switch {
				case key == "group_id":
					k.groups = append(k.groups, value)
				case key == "topic" || strings.HasSuffix(key, "_topic"):
					k.readWrites = append(k.readWrites, value)
				}
			})
		}
	}
	return k
}

// walkStrings calls fn with every string value under v and its map key.
func walkStrings(v any, key string, fn func(key, value string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			walkStrings(e, k, fn)
		}
	case []any:
		for _, e := range v {
			walkStrings(e, key, fn)
		}
	case string:
		fn(key, v)
	}
}

// readDocs splits a multi-document YAML file and decodes every document.
func readDocs[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []T
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var v T
		require.NoError(t, yaml.Unmarshal(doc, &v), path)
		out = append(out, v)
	}
	return out
}

func strimziTopics(t *testing.T) map[string]kafkaTopic {
	topics := map[string]kafkaTopic{}
	for _, kt := range readDocs[kafkaTopic](t, filepath.Join("..", "kafka", "strimzi", "topics.yaml")) {
		require.Equal(t, "KafkaTopic", kt.Kind)
		topics[kt.Spec.TopicName] = kt
	}
	return topics
}

// TestStrimziTopicsMatchCollectorConfigs: Strimzi's CRDs are not in the
// test API server, so the example is checked against the collector
// configs here: every topic the agent or gateway uses exists, accepts the
// largest message the producers send, and survives one broker down.
func TestStrimziTopicsMatchCollectorConfigs(t *testing.T) {
	agent := readCollectorKafka(t, "agent")
	gateway := readCollectorKafka(t, "gateway")
	// The agents write the inputs only; fault records come from the
	// gateways' correlator alone (docs/security.md).
	require.ElementsMatch(t, agentInputTopics, agent.produces)
	require.Contains(t, gateway.produces, "gpu_faults")
	require.NotEmpty(t, gateway.consumes)

	gatewayReplicas := baseGatewayReplicas(t)
	topics := strimziTopics(t)
	require.Len(t, topics, 5)
	for _, name := range slices.Concat(agent.produces, agent.readWrites, gateway.produces, gateway.consumes, gateway.readWrites) {
		kt, ok := topics[name]
		if !assert.True(t, ok, "no KafkaTopic for %s", name) {
			continue
		}
		assert.EqualValues(t, kafkaMaxMessageBytes, kt.Spec.Config["max.message.bytes"], name)
		for _, max := range slices.Concat(agent.maxMessageBytes, gateway.maxMessageBytes) {
			assert.Less(t, max, kafkaMaxMessageBytes, "%s: producer.max_message_bytes must stay below the topic's max.message.bytes", name)
		}
		assert.Equal(t, 3, kt.Spec.Replicas, name)
		assert.EqualValues(t, 2, kt.Spec.Config["min.insync.replicas"], name)
		assert.Equal(t, "delete", kt.Spec.Config["cleanup.policy"], name)
		assert.Zero(t, kt.Spec.Partitions%gatewayReplicas, "%s: %d partitions do not spread evenly over %d gateways", name, kt.Spec.Partitions, gatewayReplicas)
	}
	assert.EqualValues(t, 24*3600*1000, topics["otlp_spans"].Spec.Config["retention.ms"], "spans: 24 h")
	assert.EqualValues(t, 30*24*3600*1000, topics["gpu_faults"].Spec.Config["retention.ms"], "faults: 30 days")

	kafka := readStrimziKafka(t)
	assert.EqualValues(t, kafkaMaxMessageBytes, kafka.Spec.Kafka.Config["message.max.bytes"])
	assert.EqualValues(t, false, kafka.Spec.Kafka.Config["auto.create.topics.enable"])
}

// TestStrimziTLSListener: the chart's production values talk to the example Kafka
// over TLS with SCRAM-SHA-512, as the users authenticate; the User
// Operator (which by default watches the Kafka's namespace only) must see
// the users, so they live next to the Kafka.
func TestStrimziTLSListener(t *testing.T) {
	kafka := readStrimziKafka(t)
	l := kafka.scramTLSListener(t)
	assert.Equal(t, 9093, l.Port)
	assert.Equal(t, "otelcol-gpu-cluster-ca-cert", kafka.clusterCASecret())
	users := readStrimziUsers(t)
	require.NotEmpty(t, users)
	for name, u := range users {
		assert.Equal(t, kafka.Metadata.Namespace, u.Metadata.Namespace, "KafkaUser %s", name)
	}
}

// agentInputTopics: what the agents write, and all they may.
var agentInputTopics = []string{"otlp_metrics", "otlp_logs", "otlp_spans"}

// aclAllows says whether u's ACLs allow op on the resource of type typ and
// the given name, as Kafka's simple authorizer reads them: a literal name
// or "*", a prefix, and All for every operation. Read, Write and the
// others imply Describe.
func aclAllows(u kafkaUser, typ, name, op string) bool {
	for _, acl := range u.Spec.Authorization.ACLs {
		r := acl.Resource
		match := r.Name == name || r.Name == "*" || (r.PatternType == "prefix" && strings.HasPrefix(name, r.Name))
		if r.Type != typ || !match {
			continue
		}
		if slices.Contains(acl.Operations, op) || slices.Contains(acl.Operations, "All") {
			return true
		}
		if op == "Describe" && len(acl.Operations) > 0 {
			return true
		}
	}
	return false
}

// agentUsers are the KafkaUsers meant for agents: otelcol-gpu-agent and any
// per-node otelcol-gpu-agent-<node>.
func agentUsers(users map[string]kafkaUser) map[string]kafkaUser {
	out := map[string]kafkaUser{}
	for name, u := range users {
		if name == "otelcol-gpu-agent" || strings.HasPrefix(name, "otelcol-gpu-agent-") {
			out[name] = u
		}
	}
	return out
}

// TestStrimziUsersACLs: every topic and consumer group that a shipped
// config uses is allowed to its distribution's user; agents may write
// their input topics and nothing else (never gpu_faults, no reads, no
// groups); only the gateway writes gpu_faults.
func TestStrimziUsersACLs(t *testing.T) {
	agent := readCollectorKafka(t, "agent")
	gateway := readCollectorKafka(t, "gateway")
	users := readStrimziUsers(t)
	for name, u := range users {
		assert.Equal(t, "scram-sha-512", u.Spec.Authentication.Type, name)
	}
	require.Contains(t, users, "otelcol-gpu-agent")
	require.Contains(t, users, "otelcol-gpu-gateway")
	agentUser, gatewayUser := users["otelcol-gpu-agent"], users["otelcol-gpu-gateway"]

	// What the configs use, allowed.
	for _, topic := range agent.produces {
		assert.True(t, aclAllows(agentUser, "topic", topic, "Write"), "agent writes %s", topic)
	}
	for _, topic := range agent.readWrites {
		t.Errorf("the agent config names topic %s outside its kafka exporter", topic)
	}
	assert.Empty(t, agent.consumes, "agents consume nothing")
	assert.Empty(t, agent.groups, "agents join no consumer group")
	for _, topic := range gateway.consumes {
		assert.True(t, aclAllows(gatewayUser, "topic", topic, "Read"), "gateway reads %s", topic)
	}
	for _, topic := range gateway.produces {
		assert.True(t, aclAllows(gatewayUser, "topic", topic, "Write"), "gateway writes %s", topic)
	}
	for _, topic := range gateway.readWrites {
		assert.True(t, aclAllows(gatewayUser, "topic", topic, "Write"), "gateway writes %s", topic)
		assert.True(t, aclAllows(gatewayUser, "topic", topic, "Read"), "gateway reads %s back", topic)
	}
	require.NotEmpty(t, gateway.groups)
	for _, group := range gateway.groups {
		assert.True(t, aclAllows(gatewayUser, "group", group, "Read"), "gateway consumer group %s", group)
	}
	assert.False(t, aclAllows(gatewayUser, "group", "someone-else", "Read"))

	// And no more, for agents: no principal an agent holds can open a
	// fault, or read what other nodes sent.
	agents := agentUsers(users)
	require.NotEmpty(t, agents)
	for name, u := range agents {
		assert.False(t, aclAllows(u, "topic", "gpu_faults", "Write"), "%s may write gpu_faults", name)
		assert.False(t, aclAllows(u, "topic", "gpu_fault_decisions", "Write"), "%s may write gpu_fault_decisions", name)
		for _, acl := range u.Spec.Authorization.ACLs {
			r := acl.Resource
			if assert.Equal(t, "topic", r.Type, "%s: ACL on a %s", name, r.Type) {
				assert.Equal(t, "literal", r.PatternType, "%s: %s", name, r.Name)
				assert.Contains(t, agentInputTopics, r.Name, "%s: ACL on topic %s", name, r.Name)
			}
			for _, op := range acl.Operations {
				assert.Contains(t, []string{"Write", "Describe"}, op, "%s: %s on %s", name, op, r.Name)
			}
		}
	}
	// Only gateways write fault records or decisions.
	for name, u := range users {
		for _, topic := range []string{"gpu_faults", "gpu_fault_decisions"} {
			if aclAllows(u, "topic", topic, "Write") {
				assert.Equal(t, "otelcol-gpu-gateway", name, "%s may write %s", name, topic)
			}
		}
	}
	// The gateway reads, writes, describes: it creates, deletes or
	// reconfigures nothing.
	for _, acl := range gatewayUser.Spec.Authorization.ACLs {
		for _, op := range acl.Operations {
			assert.Contains(t, []string{"Read", "Write", "Describe"}, op, "gateway: %s on %s %s", op, acl.Resource.Type, acl.Resource.Name)
		}
	}
}

// baseGatewayReplicas is the chart's default number of gateways.
func baseGatewayReplicas(t *testing.T) int {
	t.Helper()
	sts := typed[appsv1.StatefulSet](t, helmTemplate(t, scenarioByName(t, defaultScenario)), "StatefulSet", "otelcol-gpu-gateway")
	require.NotNil(t, sts.Spec.Replicas)
	return int(*sts.Spec.Replicas)
}
