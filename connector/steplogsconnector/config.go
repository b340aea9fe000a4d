package steplogsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector"

// Config of the steplogs connector: nothing to set.
type Config struct {
	// prevent unkeyed literal initialization
	_ struct{}
}
