// Package remediationexporter acts on confirmed faults: it consumes the
// faultcorrelator's fault records (docs/fault-record.md), maps fault type
// and severity to actions through a policy, and quarantines nodes through a
// platform (Kubernetes or Slurm, behind internal/actuator) and posts signed
// webhooks, with the safety rails trusted systems use: dry run, idempotency
// by fault id, a per-node cooldown, one active leader, a cluster-wide
// circuit breaker, maintenance exclusions, ownership, an audit trail, and
// human approval for RMA. See README.md.
package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"
