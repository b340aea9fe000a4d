package lifecycle

import (
	"slices"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// missing is want less have, in want's order.
func missing(want, have []actuator.Action) []actuator.Action {
	var out []actuator.Action
	for _, a := range want {
		if !slices.Contains(have, a) {
			out = append(out, a)
		}
	}
	return out
}

// addActions appends to have the actions of more it lacks.
func addActions(have, more []actuator.Action) []actuator.Action {
	for _, a := range more {
		if !slices.Contains(have, a) {
			have = append(have, a)
		}
	}
	return have
}
