package loadtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// OwnTypes returns this repository's component types (the type: of every
// <kind>/<component>/metadata.yaml under root): a contrib-only gateway runs
// without any of them. Reading them keeps the baseline right as components
// are added.
func OwnTypes(root string) (map[string]bool, error) {
	var paths []string
	for _, kind := range []string{"receiver", "processor", "exporter", "connector", "extension"} {
		m, err := filepath.Glob(filepath.Join(root, kind, "*", "metadata.yaml"))
		if err != nil {
			return nil, fmt.Errorf("loadtest: %w", err)
		}
		paths = append(paths, m...)
	}
	own := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("loadtest: %w", err)
		}
		var md struct {
			Type string `yaml:"type"`
		}
		if err := yaml.Unmarshal(b, &md); err != nil {
			return nil, fmt.Errorf("loadtest: %s: %w", p, err)
		}
		if md.Type != "" {
			own[md.Type] = true
		}
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("loadtest: no component metadata.yaml under %s", root)
	}
	return own, nil
}

// gpuFaultsReceiverType is receiver/gpufaultsreceiver's type.
const gpuFaultsReceiverType = "gpu_faults"

func componentType(id string) string {
	typ, _, _ := strings.Cut(id, "/")
	return typ
}

// GatewayConfig is a parsed collector configuration (YAML anchors and merge
// keys resolved; ${env:...} left for the collector).
type GatewayConfig map[string]any

// ParseGatewayConfig reads a gateway configuration.
func ParseGatewayConfig(doc []byte) (GatewayConfig, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(doc, &cfg); err != nil {
		return nil, fmt.Errorf("loadtest: gateway configuration: %w", err)
	}
	service, _ := asMap(cfg["service"])
	if _, ok := asMap(service["pipelines"]); !ok {
		return nil, errors.New("loadtest: gateway configuration has no service::pipelines")
	}
	return cfg, nil
}

// Marshal writes the configuration back as YAML.
func (c GatewayConfig) Marshal() ([]byte, error) { return yaml.Marshal(map[string]any(c)) }

func asMap(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

func asStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func (c GatewayConfig) pipelines() map[string]any {
	service, _ := asMap(c["service"])
	p, _ := asMap(service["pipelines"])
	return p
}

// defaultTopics are the kafka receiver's topics when a signal names none.
var defaultTopics = map[string]string{"traces": TopicSpans, "metrics": TopicMetrics, "logs": TopicLogs}

// ConsumerGroups lists every (consumer group, topic) that the kafka
// receivers of the configuration's pipelines read: the harness waits until
// each has committed everything.
func (c GatewayConfig) ConsumerGroups() []GroupTopic {
	receivers, _ := asMap(c["receivers"])
	seen := map[GroupTopic]bool{}
	for name, p := range c.pipelines() {
		signal := componentType(name)
		pm, _ := asMap(p)
		for _, r := range asStrings(pm["receivers"]) {
			if componentType(r) != "kafka" {
				continue
			}
			rc, _ := asMap(receivers[r])
			group, _ := rc["group_id"].(string)
			if group == "" {
				group = "otel-collector"
			}
			sc, _ := asMap(rc[signal])
			topics := asStrings(sc["topics"])
			if len(topics) == 0 {
				topics = []string{defaultTopics[signal]}
			}
			for _, t := range topics {
				seen[GroupTopic{Group: group, Topic: t}] = true
			}
		}
	}
	out := make([]GroupTopic, 0, len(seen))
	for gt := range seen {
		out = append(out, gt)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Group+"/"+out[i].Topic < out[j].Group+"/"+out[j].Topic
	})
	return out
}

// HasProcessor says whether a pipeline of the signal uses a processor of
// the type (tail_sampling, say).
func (c GatewayConfig) HasProcessor(signal, typ string) bool {
	for name, p := range c.pipelines() {
		if componentType(name) != signal {
			continue
		}
		pm, _ := asMap(p)
		for _, proc := range asStrings(pm["processors"]) {
			if componentType(proc) == typ {
				return true
			}
		}
	}
	return false
}

// ContribOnly derives the contrib-only baseline from a gateway
// configuration: the same kafka receivers, memory_limiter, exporters and
// whatever else contrib provides (tail sampling, forward connectors), none
// of this repository's components, and no pipeline that only exists to feed
// them (the detection and fault pipelines). Deriving it at run time keeps
// the baseline in step with distributions/gateway/config.yaml.
func (c GatewayConfig) ContribOnly(ownTypes map[string]bool) (GatewayConfig, error) {
	out, err := c.clone()
	if err != nil {
		return nil, err
	}
	pipelines := out.pipelines()
	for name, p := range pipelines {
		pm, _ := asMap(p)
		for _, key := range []string{"receivers", "processors", "exporters"} {
			kept := slices.DeleteFunc(asStrings(pm[key]), func(id string) bool { return ownTypes[componentType(id)] })
			pm[key] = toAny(kept)
		}
		if len(asStrings(pm["receivers"])) == 0 || len(asStrings(pm["exporters"])) == 0 {
			delete(pipelines, name)
		}
	}
	out.dropDanglingConnectors()
	if len(pipelines) == 0 {
		return nil, errors.New("loadtest: no contrib-only pipeline left")
	}
	out.prune()
	return out, nil
}

// WithoutDetection is the configuration without fault detection (the
// */detect pipelines, the correlator wherever it is fed, what only it
// feeds, and remediation's pipeline from gpu_faults): what the backends' path
// alone costs, to attribute the full gateway's extra cost.
func (c GatewayConfig) WithoutDetection() (GatewayConfig, error) {
	out, err := c.clone()
	if err != nil {
		return nil, err
	}
	pipelines := out.pipelines()
	for name, p := range pipelines {
		pm, _ := asMap(p)
		// Detection's inputs, and remediation, which reads what detection
		// wrote to gpu_faults.
		if strings.HasSuffix(name, "/detect") || slices.ContainsFunc(asStrings(pm["receivers"]), func(id string) bool {
			return componentType(id) == gpuFaultsReceiverType
		}) {
			delete(pipelines, name)
			continue
		}
		// The traces pipeline feeds the correlator beside its backends.
		pm["exporters"] = toAny(slices.DeleteFunc(asStrings(pm["exporters"]), func(id string) bool {
			return componentType(id) == "faultcorrelator"
		}))
	}
	out.dropDanglingConnectors()
	if len(pipelines) == 0 {
		return nil, errors.New("loadtest: no pipeline left without detection")
	}
	out.prune()
	return out, nil
}

// dropDanglingConnectors removes connectors that no pipeline feeds (from
// receivers) or none reads (from exporters), and pipelines left without a
// receiver or an exporter, until nothing changes.
func (c GatewayConfig) dropDanglingConnectors() {
	connectors, _ := asMap(c["connectors"])
	pipelines := c.pipelines()
	for changed := true; changed; {
		changed = false
		fed, read := map[string]bool{}, map[string]bool{}
		for _, p := range pipelines {
			pm, _ := asMap(p)
			for _, id := range asStrings(pm["exporters"]) {
				fed[id] = true
			}
			for _, id := range asStrings(pm["receivers"]) {
				read[id] = true
			}
		}
		for name, p := range pipelines {
			pm, _ := asMap(p)
			for key, ok := range map[string]map[string]bool{"receivers": fed, "exporters": read} {
				ids := asStrings(pm[key])
				kept := slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
					_, isConnector := connectors[id]
					return isConnector && !ok[id]
				})
				if len(kept) != len(ids) {
					pm[key] = toAny(kept)
					changed = true
				}
			}
			if len(asStrings(pm["receivers"])) == 0 || len(asStrings(pm["exporters"])) == 0 {
				delete(pipelines, name)
				changed = true
			}
		}
	}
}

// prune drops component definitions no pipeline uses any more.
func (c GatewayConfig) prune() {
	used := map[string]bool{}
	for _, p := range c.pipelines() {
		pm, _ := asMap(p)
		for _, key := range []string{"receivers", "processors", "exporters"} {
			for _, id := range asStrings(pm[key]) {
				used[id] = true
			}
		}
	}
	for _, section := range []string{"receivers", "processors", "exporters", "connectors"} {
		m, ok := asMap(c[section])
		if !ok {
			continue
		}
		for id := range m {
			if !used[id] {
				delete(m, id)
			}
		}
	}
}

func (c GatewayConfig) clone() (GatewayConfig, error) {
	b, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	return ParseGatewayConfig(b)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
