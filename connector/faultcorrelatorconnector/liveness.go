package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// maxJobsPerWatchedHost bounds the jobs remembered per watched host
// (node.silent).
const maxJobsPerWatchedHost = 64

// activity is what one batch says about who is alive (gateway mode, for
// node.silent): when (on arrival: callers pass the batch's arrival, not
// the data's time, which a node's clock may skew) each host and each job
// last sent anything, and
// which hosts run ranks of which job. A nil activity (agent mode) notes
// nothing.
type activity struct {
	hosts map[string]time.Time
	jobs  map[string]time.Time
	ranks map[hostJob]struct{}
	// The last host, job and rank host noted, with the host's and job's
	// times: consecutive spans mostly share them, and these spare the
	// map updates.
	lastHost, lastJob     string
	lastHostAt, lastJobAt time.Time
	lastRank              hostJob
}

type hostJob struct{ host, job string }

// newActivity returns the activity of one batch, nil in agent mode. It is
// c.batchActivity emptied: a gateway's batches are often one Kafka message
// of a few spans, and three new maps for each was most of what the span
// path allocated. Callers hold c.mu until they noted it.
func (c *correlator) newActivity() *activity {
	if c.cfg.Mode != ModeGateway {
		return nil
	}
	a := &c.batchActivity
	if a.hosts == nil {
		*a = activity{hosts: map[string]time.Time{}, jobs: map[string]time.Time{}, ranks: map[hostJob]struct{}{}}
		return a
	}
	clear(a.hosts)
	clear(a.jobs)
	clear(a.ranks)
	*a = activity{hosts: a.hosts, jobs: a.jobs, ranks: a.ranks}
	return a
}

// saw notes an input about w at time at: its host and its job are alive.
func (a *activity) saw(w where, at time.Time) {
	if a == nil {
		return
	}
	if w.host != "" && (w.host != a.lastHost || at.After(a.lastHostAt)) {
		if at.After(a.hosts[w.host]) {
			a.hosts[w.host] = at
		}
		a.lastHost, a.lastHostAt = w.host, a.hosts[w.host]
	}
	if w.job != "" && (w.job != a.lastJob || at.After(a.lastJobAt)) {
		if at.After(a.jobs[w.job]) {
			a.jobs[w.job] = at
		}
		a.lastJob, a.lastJobAt = w.job, a.jobs[w.job]
	}
}

// sawRank notes a rank span: its host runs ranks of its job.
func (a *activity) sawRank(w where) {
	if a != nil && w.host != "" && w.job != "" && w.rankKnown {
		if hj := (hostJob{w.host, w.job}); hj != a.lastRank {
			a.ranks[hj] = struct{}{}
			a.lastRank = hj
		}
	}
}

// noteActivity applies a batch's activity. A host is watched from its
// first rank span on: node.heartbeat is observed for watched hosts only, so
// a node that never ran a rank never goes "silent". Whether the host's
// jobs are still running is checked when node_silent matches
// (jobRunning). Callers hold c.mu.
func (c *correlator) noteActivity(a *activity) {
	if a == nil {
		return
	}
	for hj := range a.ranks {
		jobs := c.hostJobs[hj.host]
		if jobs == nil {
			if len(c.hostJobs) >= c.cfg.MaxEntities {
				continue
			}
			jobs = map[string]struct{}{}
			c.hostJobs[hj.host] = jobs
		}
		if _, known := jobs[hj.job]; !known && len(jobs) >= maxJobsPerWatchedHost {
			continue
		}
		if _, known := c.jobSeen[hj.job]; !known {
			if len(c.jobSeen) >= c.cfg.MaxEntities {
				continue
			}
			c.jobSeen[hj.job] = time.Time{}
		}
		jobs[hj.job] = struct{}{}
	}
	for job, at := range a.jobs {
		if last, known := c.jobSeen[job]; known && at.After(last) {
			c.jobSeen[job] = at
		}
	}
	// A heartbeat opens nothing (node.silent holds on its absence): it
	// does not make its input wait for an evaluation (handoff.go).
	kept := c.kept
	for host, at := range a.hosts {
		if _, watched := c.hostJobs[host]; watched {
			c.observe(where{host: host}, rules.Sample{Signal: semconv.SignalNodeHeartbeat, Value: 1, At: at})
		}
	}
	c.kept = kept
}

// jobRunning reports whether a job with ranks on host sent anything at or
// after since. Callers hold c.mu.
func (c *correlator) jobRunning(host string, since time.Time) bool {
	for job := range c.hostJobs[host] {
		if !c.jobSeen[job].Before(since) {
			return true
		}
	}
	return false
}

// forgetJobs drops jobs that sent nothing for as long as the evaluator
// remembers a node, and stops watching hosts left without a job. Callers
// hold c.mu.
func (c *correlator) forgetJobs(now time.Time) {
	cutoff := now.Add(-c.eval.ForgetAfter(fault.EntityNode))
	dropped := false
	for job, last := range c.jobSeen {
		if last.Before(cutoff) {
			delete(c.jobSeen, job)
			dropped = true
		}
	}
	if !dropped {
		return
	}
	for host, jobs := range c.hostJobs {
		for job := range jobs {
			if _, known := c.jobSeen[job]; !known {
				delete(jobs, job)
			}
		}
		if len(jobs) == 0 {
			delete(c.hostJobs, host)
		}
	}
}
