package faultcorrelatorconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestActivityKeepsLatestPerHostAndJob(t *testing.T) {
	c, _, _ := newTestCorrelator(t, func(cfg *Config) { cfg.Mode = ModeGateway })
	a := c.newActivity()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a.saw(where{host: "a", job: "j"}, at(2))
	a.saw(where{host: "a", job: "j"}, at(1)) // older: changes nothing
	a.saw(where{host: "b", job: "j"}, at(3))
	a.saw(where{host: "a", job: "k"}, at(1))
	a.saw(where{host: "a", job: "j"}, at(5))
	a.saw(where{host: "b"}, at(0))
	assert.Equal(t, map[string]time.Time{"a": at(5), "b": at(3)}, a.hosts)
	assert.Equal(t, map[string]time.Time{"j": at(5), "k": at(1)}, a.jobs)

	for _, h := range []string{"a", "a", "b", "a"} {
		a.sawRank(where{host: h, job: "j", rankKnown: true})
	}
	a.sawRank(where{host: "c", job: "j"}) // no rank: not a rank span
	assert.Equal(t, map[hostJob]struct{}{{"a", "j"}: {}, {"b", "j"}: {}}, a.ranks)
}
