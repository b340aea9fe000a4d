package analysis

import (
	"strconv"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// A dump's pg_status is keyed by the rank's own id of each process group
// (the entries' pg_id: the order in which this process created its groups),
// not by the group's name (pg_config's key, the first element of an
// entry's process_group, which every member shares). In the real dumps of a
// 16-rank Megatron job (testdata/real) rank 0's pg_status keys are 0, 1, 4,
// 5, 6, ... while its pg_config names are 0, 1, 108, 33, ...; and key 6 is
// PIPELINE_MODEL_PARALLEL_GROUP "39" on rank 0 but "42" on rank 1. Joining
// pg_status across ranks by its key compares unrelated groups, so each
// rank's pg_status is first resolved to group names, on that rank alone:
//
//   - a key that is the pg_id of one of the rank's entries names that
//     entry's group;
//   - a key no entry resolves names the group of that name only when the
//     dump keys pg_status by name throughout (every key is a pg_config name,
//     or the dump has no pg_config to say otherwise, and no entry uses a key
//     as the pg_id of another group: older dumps and single-group jobs,
//     where the two coincide);
//   - any other key is left out of every comparison across ranks: a rank
//     whose dump holds no entries (nothing in flight) and whose keys are not
//     its groups' names says nothing about which group is which.

// resolveGroupStatus returns r's pg_status keyed by process-group name.
func resolveGroupStatus(r *Rank) map[string]frdump.PGStatus {
	if len(r.PGStatus) == 0 {
		return nil
	}
	byID := map[string]string{}
	ambiguous := map[string]bool{}
	for i := range r.Ops {
		e := &r.Ops[i]
		id, name := strconv.FormatInt(e.PGID, 10), groupName(e)
		if old, ok := byID[id]; ok && old != name {
			ambiguous[id] = true
		}
		byID[id] = name
	}
	byName := true
	for key := range r.PGStatus {
		if _, ok := r.PGConfig[key]; !ok && len(r.PGConfig) > 0 {
			byName = false
			break
		}
		if name, ok := byID[key]; ok && name != key {
			byName = false
			break
		}
	}
	out := make(map[string]frdump.PGStatus, len(r.PGStatus))
	for key, st := range r.PGStatus {
		if name, ok := byID[key]; ok && !ambiguous[key] {
			out[name] = st
		} else if byName && !ambiguous[key] {
			out[key] = st
		}
	}
	return out
}
