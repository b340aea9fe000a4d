package nodeauthextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults and bounds of the Kubernetes mode.
const (
	defaultAudience  = "otelcol-gpu-central"
	defaultCacheTTL  = 30 * time.Second
	maxCacheTTL      = 5 * time.Minute
	defaultCacheSize = 4096
	maxCacheSize     = 1 << 20
)

// Config is the configuration of the nodeauth extension: exactly one of
// tokens_file and kubernetes::service_account.
type Config struct {
	// TokensFile is a file of "<token> <node>" lines, one token per line
	// (a node may have two, while its token is rotated); blank lines and
	// lines starting with # are skipped. Re-read when it changes.
	TokensFile string `mapstructure:"tokens_file"`
	// Kubernetes checks ServiceAccount tokens with TokenReviews.
	Kubernetes KubernetesConfig `mapstructure:"kubernetes"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// KubernetesConfig is the Kubernetes mode: the agents present their pods'
// projected ServiceAccount tokens.
type KubernetesConfig struct {
	// ServiceAccount is the agents' ServiceAccount, namespace/name: a
	// token of any other account (a training pod's) is refused. Empty:
	// the Kubernetes mode is off.
	ServiceAccount string `mapstructure:"service_account"`
	// Audience the agents' tokens are issued for (the projected volume's
	// audience); the TokenReview asks for it, so a token issued for the
	// API server or anything else is refused.
	Audience string `mapstructure:"audience"`
	// Kubeconfig is a kubeconfig file; empty: the pod's own ServiceAccount
	// (in-cluster), which needs "create tokenreviews".
	Kubeconfig string `mapstructure:"kubeconfig"`
	// CacheTTL is how long a review's answer is reused for the same
	// token: a deleted pod's token is refused at most this long after.
	// 0: every request is reviewed.
	CacheTTL time.Duration `mapstructure:"cache_ttl"`
	// CacheSize bounds the tokens whose answers are held.
	CacheSize int `mapstructure:"cache_size"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// enabled says whether the Kubernetes mode is configured.
func (k KubernetesConfig) enabled() bool { return k.ServiceAccount != "" }

// serviceAccount splits ServiceAccount into its namespace and name.
func (k KubernetesConfig) serviceAccount() (namespace, name string) {
	namespace, name, _ = strings.Cut(k.ServiceAccount, "/")
	return namespace, name
}

// Validate checks the configuration. Messages name the key and the bad
// value.
func (cfg *Config) Validate() error {
	k := cfg.Kubernetes
	switch {
	case cfg.TokensFile == "" && !k.enabled():
		return errors.New("set tokens_file (a file of \"<token> <node>\" lines) or kubernetes::service_account (namespace/name of the agents' ServiceAccount)")
	case cfg.TokensFile != "" && k.enabled():
		return fmt.Errorf("tokens_file %q and kubernetes::service_account %q: set one of them", cfg.TokensFile, k.ServiceAccount)
	case cfg.TokensFile != "":
		if cfg.TokensFile != strings.TrimSpace(cfg.TokensFile) {
			return fmt.Errorf("tokens_file %q: leading or trailing white space", cfg.TokensFile)
		}
		return nil
	}
	var errs []error
	ns, name := k.serviceAccount()
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 || strings.Count(k.ServiceAccount, "/") != 1 {
		errs = append(errs, fmt.Errorf("kubernetes::service_account %q: want namespace/name of a ServiceAccount", k.ServiceAccount))
	}
	if strings.TrimSpace(k.Audience) == "" || k.Audience != strings.TrimSpace(k.Audience) {
		errs = append(errs, fmt.Errorf("kubernetes::audience %q: want the projected token's audience, e.g. %s", k.Audience, defaultAudience))
	}
	if k.CacheTTL < 0 || k.CacheTTL > maxCacheTTL {
		errs = append(errs, fmt.Errorf("kubernetes::cache_ttl %s: want 0 to %s (a deleted pod's token works that long)", k.CacheTTL, maxCacheTTL))
	}
	if k.CacheSize < 1 || k.CacheSize > maxCacheSize {
		errs = append(errs, fmt.Errorf("kubernetes::cache_size %d: want 1 to %d", k.CacheSize, maxCacheSize))
	}
	return errors.Join(errs...)
}
