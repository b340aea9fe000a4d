package dcgmsrc

// The source's configuration and its defaults.

import "time"

// Defaults for the zero values of Config.
const (
	DefaultCollectionInterval = 10 * time.Second
	DefaultProfilingInterval  = 30 * time.Second
	DefaultXIDPollInterval    = time.Second
	DefaultCallTimeout        = 5 * time.Second
)

// Config is the dcgm source's configuration.
type Config struct {
	// Mode is ModeStandalone (default) or ModeEmbedded.
	Mode Mode
	// Endpoint of nv-hostengine in standalone mode: host:port, or a unix
	// socket as /path or unix:///path. Default DefaultEndpoint.
	Endpoint string
	// CollectionInterval is how often DCGM samples the device fields (the
	// receiver's collection_interval). Default 10 s.
	CollectionInterval time.Duration
	// ProfilingInterval is how often DCGM samples the profiling fields
	// (profiling_interval), and the first back-off when it refuses them.
	// Default 30 s.
	ProfilingInterval time.Duration
	// XIDPollInterval is how often new XIDs are read. Default 1 s.
	XIDPollInterval time.Duration
	// CallTimeout bounds the DCGM calls for one GPU in one collection; a GPU
	// that takes longer is reported Unresponsive. Default 5 s.
	CallTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeStandalone
	}
	if c.Mode == ModeStandalone && c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	if c.CollectionInterval <= 0 {
		c.CollectionInterval = DefaultCollectionInterval
	}
	if c.ProfilingInterval <= 0 {
		c.ProfilingInterval = DefaultProfilingInterval
	}
	if c.XIDPollInterval <= 0 {
		c.XIDPollInterval = DefaultXIDPollInterval
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	return c
}
