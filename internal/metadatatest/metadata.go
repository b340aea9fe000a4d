// Package metadatatest checks a component's metadata.yaml against its code:
// type and stability against the factory, distributions against the ocb
// manifests, metrics against what the component emits, and internal
// telemetry against the instruments it registers. mdatagen is not available
// here, so the checks keep the hand-written metadata.yaml files honest.
//
// Each component calls Check from a test in its own package; Go runs the
// test in the package directory, which is where metadata.yaml is read from
// and how the component's import path is found.
package metadatatest // import "github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"

import (
	"bytes"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// metadata is the part of metadata.yaml (mdatagen's layout) the checks read.
type metadata struct {
	Type      string `yaml:"type"`
	ScopeName string `yaml:"scope_name"`
	Status    struct {
		Class string `yaml:"class"`
		// Stability maps a level (alpha, development, ...) to its signals.
		Stability     map[string][]string `yaml:"stability"`
		Distributions []string            `yaml:"distributions"`
	} `yaml:"status"`
	Metrics   map[string]metricDoc `yaml:"metrics"`
	Telemetry struct {
		Metrics map[string]telemetryDoc `yaml:"metrics"`
	} `yaml:"telemetry"`
}

// metricDoc is one metric the component emits.
type metricDoc struct {
	Description string   `yaml:"description"`
	Unit        *string  `yaml:"unit"`
	Gauge       *dataDoc `yaml:"gauge"`
	Sum         *dataDoc `yaml:"sum"`
	Histogram   *dataDoc `yaml:"histogram"`
}

// telemetryDoc is one instrument of the component's own telemetry. Its key
// in metadata.yaml is the instrument name without the otelcol_ prefix, as
// mdatagen has it.
type telemetryDoc struct {
	metricDoc `yaml:",inline"`
	Stability struct {
		Level string `yaml:"level"`
	} `yaml:"stability"`
}

type dataDoc struct {
	Monotonic              *bool  `yaml:"monotonic"`
	AggregationTemporality string `yaml:"aggregation_temporality"`
}

// readMetadata reads path. yaml.v3 refuses a key given twice, so a metric
// documented twice is an error, not a silent override.
func readMetadata(path string) (*metadata, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var md metadata
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&md); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &md, nil
}

// kind returns the metric's data type as pmetric names it, or an error
// when metadata.yaml gives none or several.
func (m metricDoc) kind() (string, *dataDoc, error) {
	var kinds []string
	var d *dataDoc
	for _, k := range []struct {
		name string
		doc  *dataDoc
	}{{"Gauge", m.Gauge}, {"Sum", m.Sum}, {"Histogram", m.Histogram}} {
		if k.doc != nil {
			kinds = append(kinds, k.name)
			d = k.doc
		}
	}
	if len(kinds) != 1 {
		return "", nil, fmt.Errorf("want exactly one of gauge, sum, histogram; got %v", kinds)
	}
	return kinds[0], d, nil
}
