package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
)

// Defaults of the configuration.
const (
	// DefaultEndpoint is where the agent serves the repair API.
	DefaultEndpoint = "0.0.0.0:8790"
	// DefaultResetTimeout bounds the reset command: nvidia-smi takes
	// seconds; a reset that has not ended in two minutes has hung.
	DefaultResetTimeout = 2 * time.Minute
	// DefaultVerifyTimeout bounds a verification's checks together: a DCGM
	// level 3 diagnostic of eight GPUs takes well under an hour.
	DefaultVerifyTimeout = time.Hour
	// DefaultIdleWait is how long a verification waits for its GPUs to be
	// idle before it ends refused.
	DefaultIdleWait = 10 * time.Minute
	// DefaultIdlePollInterval is how often a waiting verification looks.
	DefaultIdlePollInterval = 5 * time.Second
	// DefaultMaxJobs bounds the jobs kept (finished ones are evicted oldest
	// first).
	DefaultMaxJobs = 256
	// DefaultCallTimeout bounds one NVML call.
	DefaultCallTimeout = 5 * time.Second
	// DefaultSMActiveIdle: a GPU whose SM activity is above it is busy.
	DefaultSMActiveIdle = 0.01
	// DefaultSMActiveMaxAge: an older SM activity reading counts as none
	// (the dcgm receiver's profiling_interval is 30s by default).
	DefaultSMActiveMaxAge = 90 * time.Second
	// maxOutputBytes bounds what the job keeps of the reset command's
	// output.
	maxOutputBytes = 4 << 10
)

// Placeholders of the reset command's arguments.
const (
	PlaceholderIndex = "{index}" // the GPU's NVML index, as nvidia-smi -i takes it
	PlaceholderUUID  = "{uuid}"  // the GPU's UUID
)

// DefaultResetCommand resets one GPU (NVML offers no reset: go-nvml
// v0.13 has none, nvidia-smi uses the driver's private interface).
var DefaultResetCommand = []string{"nvidia-smi", "--gpu-reset", "-i", PlaceholderIndex}

// Config is the configuration of the gpu_repair receiver.
type Config struct {
	// ServerConfig is where and how the API is served: endpoint (default
	// 0.0.0.0:8790) and tls (cert_file, key_file; without tls the API is
	// served in plain HTTP, which the signatures still protect from
	// forgery and replay but not from being read).
	confighttp.ServerConfig `mapstructure:",squash"`

	// HostName is this node's name, the one the gateway signs requests
	// for (the Kubernetes node name, OTELCOL_GPU_HOST_NAME in the shipped
	// configs); default the machine's host name, as the other receivers.
	HostName string `mapstructure:"host_name"`

	// PublicKeyFile holds the gateway's Ed25519 public key (PEM, PKIX; more
	// than one block during a key rotation). Required.
	PublicKeyFile string `mapstructure:"public_key_file"`

	// MaxSkew is how far a request's timestamp may be from the agent's
	// clock (default 5m).
	MaxSkew time.Duration `mapstructure:"max_skew"`

	// ReplayCapacity bounds the request ids remembered against replay
	// (default 100000); when that many are in the window, requests are
	// refused (503) until some leave it.
	ReplayCapacity int `mapstructure:"replay_capacity"`

	// ProcRoot is where procfs is mounted; the boot id is read from
	// <proc_root>/sys/kernel/random/boot_id. Default /proc.
	ProcRoot string `mapstructure:"proc_root"`

	// CallTimeout bounds one NVML call (default 5s).
	CallTimeout time.Duration `mapstructure:"call_timeout"`

	// NodeState names the nodestate extension; when set a GPU is busy also
	// when its SM activity (gpu.prof.active, sm) is above sm_active_idle or
	// has no reading newer than sm_active_max_age. Without it, busy means
	// NVML lists a process on the GPU.
	NodeState      *component.ID `mapstructure:"nodestate"`
	SMActiveIdle   float64       `mapstructure:"sm_active_idle"`
	SMActiveMaxAge time.Duration `mapstructure:"sm_active_max_age"`

	// GPUReset is how a GPU is reset.
	GPUReset ResetConfig `mapstructure:"gpu_reset"`

	// Verify bounds verifications.
	Verify VerifyConfig `mapstructure:"verify"`

	// MaxJobs bounds the jobs kept: when that many are held the oldest
	// finished one is forgotten, and with none finished a new request is
	// refused (503). Default 256.
	MaxJobs int `mapstructure:"max_jobs"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ResetConfig is the reset command.
type ResetConfig struct {
	// Command is the program and its arguments, run without a shell;
	// {index} and {uuid} in an argument are replaced with the GPU's.
	// Default: nvidia-smi --gpu-reset -i {index}.
	Command []string `mapstructure:"command"`
	// Timeout bounds the command (default 2m); past it the command's
	// process group is killed and the job fails.
	Timeout time.Duration `mapstructure:"timeout"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// VerifyConfig bounds a verification.
type VerifyConfig struct {
	// Timeout bounds the checks of one verification together (default 1h).
	Timeout time.Duration `mapstructure:"timeout"`
	// IdleWait is how long a verification waits for its GPUs to be idle
	// (default 10m); past it the job ends refused, naming the busy GPUs.
	IdleWait time.Duration `mapstructure:"idle_wait"`
	// IdlePollInterval is how often it looks meanwhile (default 5s).
	IdlePollInterval time.Duration `mapstructure:"idle_poll_interval"`

	// Diag is how the dcgm_diag check runs (config_verify.go).
	Diag DiagConfig `mapstructure:"diag"`
	// Links is the links_steady check, and the nodestate extension the
	// confirm endpoint reads (config_verify.go).
	Links LinksConfig `mapstructure:"links"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration. Messages name the key and the bad value.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("endpoint must not be empty"))
	}
	if strings.TrimSpace(cfg.PublicKeyFile) == "" {
		errs = append(errs, errors.New("public_key_file must name the gateway's Ed25519 public key (PEM): the receiver refuses to serve without it"))
	}
	if cfg.MaxSkew <= 0 || cfg.MaxSkew > time.Hour {
		errs = append(errs, fmt.Errorf("max_skew must be greater than 0 and at most 1h, got %q", cfg.MaxSkew.String()))
	}
	if cfg.ReplayCapacity < 1 {
		errs = append(errs, fmt.Errorf("replay_capacity must be at least 1, got %d", cfg.ReplayCapacity))
	}
	if cfg.ProcRoot == "" {
		errs = append(errs, errors.New("proc_root must not be empty"))
	}
	if cfg.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("call_timeout must be greater than 0, got %q", cfg.CallTimeout.String()))
	}
	if cfg.SMActiveIdle < 0 || cfg.SMActiveIdle >= 1 {
		errs = append(errs, fmt.Errorf("sm_active_idle must be in [0, 1), got %v", cfg.SMActiveIdle))
	}
	if cfg.SMActiveMaxAge <= 0 {
		errs = append(errs, fmt.Errorf("sm_active_max_age must be greater than 0, got %q", cfg.SMActiveMaxAge.String()))
	}
	if len(cfg.GPUReset.Command) == 0 || cfg.GPUReset.Command[0] == "" {
		errs = append(errs, errors.New("gpu_reset::command must name a program (default nvidia-smi --gpu-reset -i {index})"))
	} else if !hasPlaceholder(cfg.GPUReset.Command) {
		errs = append(errs, fmt.Errorf("gpu_reset::command %q names no GPU: an argument must hold %s or %s", cfg.GPUReset.Command, PlaceholderIndex, PlaceholderUUID))
	}
	if cfg.GPUReset.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("gpu_reset::timeout must be greater than 0, got %q", cfg.GPUReset.Timeout.String()))
	}
	if cfg.Verify.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("verify::timeout must be greater than 0, got %q", cfg.Verify.Timeout.String()))
	}
	if cfg.Verify.IdleWait < 0 {
		errs = append(errs, fmt.Errorf("verify::idle_wait must not be negative, got %q", cfg.Verify.IdleWait.String()))
	}
	if cfg.Verify.IdlePollInterval <= 0 {
		errs = append(errs, fmt.Errorf("verify::idle_poll_interval must be greater than 0, got %q", cfg.Verify.IdlePollInterval.String()))
	}
	errs = append(errs, cfg.Verify.Diag.validate()...)
	errs = append(errs, cfg.Verify.Links.validate()...)
	if cfg.MaxJobs < 1 {
		errs = append(errs, fmt.Errorf("max_jobs must be at least 1, got %d", cfg.MaxJobs))
	}
	return errors.Join(errs...)
}

func hasPlaceholder(argv []string) bool {
	for _, a := range argv {
		if strings.Contains(a, PlaceholderIndex) || strings.Contains(a, PlaceholderUUID) {
			return true
		}
	}
	return false
}
