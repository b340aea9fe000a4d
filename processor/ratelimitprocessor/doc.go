// Package ratelimitprocessor bounds what one key may send: spans per
// training job, low-severity log records per host, each with a token bucket.
// Items over budget are dropped (never refused, so a Kafka partition shared
// by other jobs keeps flowing); error and slow spans and warning, XID, NCCL
// and fault records are never dropped. Metrics pass through. See README.md.
package ratelimitprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"
