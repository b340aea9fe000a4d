// Package steprecord is the one reader and writer of the training step
// record (docs/training-scripts.md): a rank's train.step span and its
// resource, saying which job, attempt, step and rank it is, the rank's
// pipeline stage, its phase times, the summary of its NCCL collectives and
// its GPU's and node's health. Every component that reads or writes those
// attributes goes through it, so that they all accept the same records.
//
// What a record may carry (the contract, "Types"):
//
//   - training.job.id: a non-empty string.
//   - training.attempt, iteration.step, training.rank and the other integer
//     attributes: an int, or a double holding an integral value (JSON
//     encoders, the Python SDK among them, send numbers as doubles); step,
//     rank and attempt never negative. An absent attempt is 0.
//   - Who the rank is (job, attempt, step, rank, world size, local rank,
//     stage, host, GPU) may sit on the span or on its resource: the span's
//     value is used when it has the contract's type, else the resource's.
//     What the step measured (phases, collectives, health, loss) is read
//     from the span only.
//   - A key named twice in one map (OTLP allows it, pdata keeps both) is
//     read by its first entry, the one pcommon.Map.Get returns and the
//     agent's provenance processor judges; the agent refuses such maps
//     from OTLP senders (internal/otlpmap), so this only decides how a map
//     from elsewhere is read, and every reader reads it alike.
//
// Readers:
//
//   - ReadIdentity(span, resource) for a caller that wants only the
//     identity, with an *Error naming the attribute and the Reason when the
//     record has none.
//   - Attrs for a one-pass reader on a hot path: one Attrs per map, filled
//     by Attrs.Read (or by Attrs.Take per attribute inside the caller's own
//     loop over the map), the resource's joined with Attrs.Inherit, then
//     Attrs.Identity. It allocates nothing, and keeps who the rank is and
//     what the straggler decision reads. The straggler processor reads a
//     step span's map once and its resource's once per resource.
//   - FieldOf classifies a key, Int reads an integer, Stage a stage, and
//     Valid says whether any field's value has the contract's type.
//
// The fault correlator's one-pass attribute reader (it reads a record's
// resource, then its own attributes, the later overriding) should classify
// each key with FieldOf and read integers with Int, never v.Int(): a rank
// sent as 5.0 is rank 5, and a training.rank that Int refuses (a string, a
// fractional double) names no rank; the span's value overrides the
// resource's only when it has the contract's type. Or, simplest, it calls
// Take for every key of the span's map on one Attrs and of the resource's
// map on another, Inherit, then Identity; Take reports the keys that are
// not the record's, for the rest of its loop. The measures it samples are
// the fields for which Field.Measured is true.
//
// Writers: PutResource (what a rank's process sets on its resource),
// PutStep and PutIdentity (who a span is about), PutStage, PutPhase,
// PutCollectives and PutHealth; TraceID, RankSpanID and RootSpanID (and
// the Identity methods) compute the contract's ids.
package steprecord // import "github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
