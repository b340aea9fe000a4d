// Package lifecycle is the remediation exporter's memory of each fault and
// each node, and the decisions that follow from it: whether a record is a
// duplicate, late or out of order; which node actions a fault still needs;
// whether a node is in its cooldown; when a node may return to service; and
// what to forget. It is pure: it does no I/O, reads no clock (callers pass
// now), starts no goroutines and knows no collector types. The exporter
// around it calls the platform and the webhook, writes the audit, runs the
// verification window's timer and serialises the calls (a State is not
// safe for concurrent use).
//
// # A fault
//
// A fault id acts once. Open starts it (or refreshes it) unless it is
// already resolved, so a late update or an open after its resolution does
// nothing. PlanQuarantine gives only the policy's actions not yet applied
// for the fault: a redelivery asks for nothing, an escalation (P2 → P1)
// for the actions it adds. Quarantined marks actions the platform answered
// for as applied, whatever its answer (a node someone else cordoned is
// left alone, and not asked about again for the same fault); only those the
// exporter holds make the fault "ours". WebhookDue sends one webhook per
// fault, and another only when its severity rises (the route changes).
//
// # A node
//
// A node counts the open faults seen on it (acted on or not) and the faults
// it was quarantined for. Resolving a fault schedules the node's return to
// service (ReleaseDecision.Schedule) once every fault of ours on it is
// resolved, each allows it (the policy's return_to_service), none holds the
// node for a human (DBE, XID 79, ...) and no other fault is open there. The
// exporter then waits the verification window; a fault that opens on the
// node meanwhile cancels the release (OpenOnNode). After a release the node
// is not quarantined again for the cooldown.
//
// # Bounds
//
// Prune forgets resolved faults after ResolvedRetention and silent open
// ones after OpenRetention (long enough to recognise redeliveries and late
// records), except faults that still hold a node; and nodes with nothing
// open, held or pending once their cooldown passed.
//
// # Restart
//
// The Restore methods rebuild the same state from the audit file of an
// earlier life, entry by entry, as the decisions that wrote them did.
// HoldQuarantined then keeps every node still quarantined for a human: the
// audit does not say whether the policy allowed its return to service.
package lifecycle // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
