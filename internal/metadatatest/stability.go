package metadatatest // import "github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"

import (
	"reflect"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/component"
)

var signals = []string{"traces", "metrics", "logs"}

// stabilityMethods maps each signal name metadata.yaml may use for class
// to the factory method that returns its stability.
func stabilityMethods(class string) map[string]string {
	title := func(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
	methods := map[string]string{}
	switch class {
	case "receiver", "processor", "exporter":
		for _, s := range signals {
			methods[s] = title(s) + "Stability"
		}
	case "connector":
		for _, from := range signals {
			for _, to := range signals {
				methods[from+"_to_"+to] = title(from) + "To" + title(to) + "Stability"
			}
		}
	case "extension":
		methods["extension"] = "Stability"
	}
	return methods
}

// checkStability compares status.stability with the levels the factory
// reports for every signal of the class (undefined: not supported).
func checkStability(md *metadata, f component.Factory) problems {
	var ps problems
	methods := stabilityMethods(md.Status.Class)
	if len(methods) == 0 {
		ps.addf("status.class %q is not one of receiver, processor, exporter, connector, extension", md.Status.Class)
		return ps
	}

	documented := map[string]string{}
	for level, sigs := range md.Status.Stability {
		for _, s := range sigs {
			if _, ok := methods[s]; !ok {
				ps.addf("status.stability.%s lists %q, not a %s signal", level, s, md.Status.Class)
			}
			if prev, dup := documented[s]; dup {
				ps.addf("status.stability lists %q under %s and %s", s, prev, level)
			}
			documented[s] = level
		}
	}

	v := reflect.ValueOf(f)
	for _, signal := range keys(methods) {
		m := v.MethodByName(methods[signal])
		if !m.IsValid() {
			ps.addf("the factory has no %s: is status.class %q right?", methods[signal], md.Status.Class)
			break
		}
		actual := ""
		if level := m.Call(nil)[0].Interface().(component.StabilityLevel); level != component.StabilityLevelUndefined {
			actual = strings.ToLower(level.String())
		}
		if documented[signal] != actual {
			ps.addf("status.stability of %s: metadata.yaml has %q, the factory's %s %q (\"\": not supported)",
				signal, documented[signal], methods[signal], actual)
		}
	}
	slices.Sort(ps)
	return ps
}
