package slurm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	require.NoError(t, func() error { c := NewDefaultConfig(); return c.Validate() }())

	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"no transport":    {func(c *Config) { c.ScontrolPath = "" }, "scontrol_path or slurmrestd.url"},
		"empty prefix":    {func(c *Config) { c.ReasonPrefix = " " }, "reason_prefix"},
		"quoted prefix":   {func(c *Config) { c.ReasonPrefix = `a"b` }, "quotes"},
		"share zero":      {func(c *Config) { c.Breaker.MaxShare = 0 }, "max_share"},
		"share above one": {func(c *Config) { c.Breaker.MaxShare = 1.5 }, "max_share"},
		"window":          {func(c *Config) { c.Breaker.Window = 0 }, "window"},
		"timeout":         {func(c *Config) { c.Timeout = -time.Second }, "timeout"},
		"rest scheme": {func(c *Config) {
			c.Slurmrestd = RestConfig{URL: "ftp://x", Token: "t", APIVersion: "v0.0.40"}
		}, "scheme"},
		"rest 22.05 api": {func(c *Config) {
			c.Slurmrestd = RestConfig{URL: "http://slurm:6820", Token: "t", APIVersion: "v0.0.38"}
		}, "cannot update nodes"},
		"rest bad api": {func(c *Config) {
			c.Slurmrestd = RestConfig{URL: "http://slurm:6820", Token: "t", APIVersion: "latest"}
		}, "v0.0.N"},
		"rest no token": {func(c *Config) {
			c.Slurmrestd = RestConfig{URL: "unix:///run/slurmrestd.sock", APIVersion: "v0.0.41"}
		}, "token"},
	} {
		t.Run(name, func(t *testing.T) {
			c := NewDefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	c := NewDefaultConfig()
	c.Slurmrestd = RestConfig{URL: "unix:///run/slurmrestd.sock", Token: "jwt", User: "slurm", APIVersion: "v0.0.41"}
	assert.NoError(t, c.Validate())
}
