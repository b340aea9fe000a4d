// Package otlpmap checks that the maps of untrusted OTLP data are in
// canonical form, and removes what is not, before anything reads them.
//
// OTLP carries a map as a list of key/value pairs, so a map can name one
// key twice, and pdata keeps both entries as they came off the wire.
// Readers then disagree: pcommon.Map.Get (and PutStr, Remove) finds the
// first entry, a loop over All or Range sees both and, if it keeps the
// last, reads the second. A sender that puts its own node's host.name
// first and another node's second gets the first judged (by the agent's
// provenance processor) and the second read (issue 29). The same holds for
// a log record's event name, which OTLP carries twice: as the record's
// EventName field and as an event.name attribute.
//
// Canonical form, what Map, Value and the record checks accept:
//
//   - every key at most once in each map: resource, scope, log record,
//     span, span event, span link, data point and exemplar attributes, and
//     every map nested in a value (a kvlist log body, a kvlist or array
//     attribute value), at any depth up to MaxDepth;
//   - nesting no deeper than MaxDepth (a deeper value cannot be checked
//     within the bound and is refused with it);
//   - a log record's EventName and its event.name attribute, when both
//     are set, naming the same event.
//
// The checks are pure functions of pdata: they allocate nothing for maps
// of up to smallMap keys (a map with more keys costs one set, of its
// size), and their cost is linear in the input for such maps. FilterLogs,
// FilterTraces and FilterMetrics apply them to a request: a record (log
// record, span, data point) that fails is removed whole, never repaired;
// a scope's map that fails removes the scope's records; a resource's map
// that fails is reported and nothing is removed, and the caller refuses
// the whole request. The agent's provenance processor runs them first on
// everything it receives over OTLP (processor/provenanceprocessor).
//
// Unique is the one way for a reader that loops over a map to read it:
// the first entry of every key, as Map.Get reads it, so that a map that
// did not pass the check (one from a Kafka producer, not an agent's OTLP
// edge) is still read the same by every reader.
package otlpmap // import "github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"
