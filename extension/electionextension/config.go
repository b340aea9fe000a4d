package electionextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/electionextension"

// Config is the configuration of the election extension. It has no
// settings: what elects is the gpu_faults receiver's consumer group
// (group_id, session_timeout, member_name, console_url are the receiver's
// keys); the extension only carries its result to the components that act
// on it.
type Config struct {
	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration: there is nothing to get wrong.
func (*Config) Validate() error { return nil }
