// Package interval holds the one floor every component's configured
// interval is checked against at start-up (issue 31). A carried-over
// setting such as dcgm-exporter's DCGM_EXPORTER_INTERVAL=30000 (milliseconds
// there) or GPU_COLLECTION_INTERVAL=10 decodes as a bare number of
// nanoseconds: without a floor the agent scraped a page 3,041 times in 10 s
// at 74 % CPU, and against a real DCGM host engine it would hammer it.
package interval // import "github.com/otelcol-gpu/otelcol-gpu/internal/interval"

import (
	"fmt"
	"time"
)

// Floor is the shortest interval a component accepts.
const Floor = 100 * time.Millisecond

// Check refuses d under Floor, naming the key and the unit the value was
// read in. Zero is refused too unless off is true (the key's zero turns
// the feature off); negatives are always refused.
func Check(key string, d time.Duration, off bool) error {
	switch {
	case d == 0 && off:
		return nil
	case d < 0:
		return fmt.Errorf("%s: must not be negative, got %s", key, d)
	case d < Floor:
		return fmt.Errorf("%s: %s is under the %s floor; give a unit (10s, 500ms): a bare number is read as nanoseconds", key, d, Floor)
	}
	return nil
}
