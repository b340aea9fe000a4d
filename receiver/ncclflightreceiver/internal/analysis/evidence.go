package analysis

import (
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// What the dumps themselves show of a stop, where their moments do not.
//
// Dumps that hold only the operations in flight (NVIDIA's resiliency
// extension has torch write them so), taken while a healthy job runs, each
// rank a moment apart, look like a hang's: the rank dumped first is behind
// its peers in the groups it was crossing, and may hold nothing in flight
// at all. What tells them apart is when each dump was taken: a hang's
// dumps come minutes after the ranks' newest enqueues (the watchdog's
// timeout), a running job's right after. Where no dump moment says that
// (unknown, or every rank idle: the watchdog's dumps, and also the file
// times of a copy), a rank is a culprit only where its dump and its peers'
// show it stopped (stoppedHere):
//
//   - its peers went on past the collective it never entered: each member
//     that entered it enqueued a later operation too (a peer whose newest
//     operation is that collective may have dumped the moment after it
//     enqueued it, before the rank's turn came); and
//   - the rank itself either holds nothing in flight (every collective it
//     enqueued completed: the rank is alive but enqueues nothing, a thread
//     holding the Python GIL), or its watchdog missed completions its peers
//     saw (it holds in flight a collective a fellow member saw complete:
//     its GPU failed, as in the real GPU-error incident, whose culprit
//     holds 23 such collectives).
//
// Where the watchdog records starts and completions, a collective started
// and never completed is evidence enough and none of this is asked.

// noneRunning: no rank is known to have been enqueuing when it dumped.
func noneRunning(times map[int]rankTimes, stall time.Duration) bool {
	for _, t := range times {
		if t.running(stall) {
			return false
		}
	}
	return true
}

// stoppedHere: the dumps show that r stopped and its peers wait for it.
func stoppedHere(al *aligned, r int, groups []*progress) bool {
	v := viewOf(al, r)
	if v == nil || !(holdsNothing(v) || missedCompletions(al, v)) {
		return false
	}
	for _, s := range stuckGroups(al, r, groups) {
		if len(s.sc.Entered) > 0 && wentOn(al, s.g.name, s.sc.Seq, s.sc.Entered) {
			return true
		}
	}
	return false
}

// holdsNothing: every collective the rank enqueued completed, by its own
// pg_status (every key's, resolved or not) and entries.
func holdsNothing(v *rankView) bool {
	if len(v.r.PGStatus) == 0 {
		return false
	}
	for _, st := range v.r.PGStatus {
		if st.LastCompleted < st.LastEnqueued {
			return false
		}
	}
	for i := range v.r.Ops {
		if e := &v.r.Ops[i]; !isP2P(e) && e.State != frdump.StateCompleted && e.CollectiveSeqID > v.status[groupName(e)].LastCompleted {
			return false
		}
	}
	return true
}

// missedCompletions: the rank holds in flight a collective that a fellow
// member of its group saw complete.
func missedCompletions(al *aligned, v *rankView) bool {
	for i := range v.r.Ops {
		e := &v.r.Ops[i]
		if isP2P(e) || e.State == frdump.StateCompleted {
			continue
		}
		name := groupName(e)
		if st, ok := v.status[name]; ok && st.LastCompleted >= e.CollectiveSeqID {
			continue
		}
		for _, w := range al.views {
			if w == v {
				continue
			}
			if st, ok := w.status[name]; ok && st.LastCompleted >= e.CollectiveSeqID {
				return true
			}
		}
	}
	return false
}

// wentOn: every rank of entered holds collective seq of the named group and
// an operation enqueued after it.
func wentOn(al *aligned, name string, seq int64, entered []int) bool {
	for _, m := range entered {
		v := viewOf(al, m)
		if v == nil {
			return false
		}
		at, later := -1, false
		for i := range v.r.Ops {
			e := &v.r.Ops[i]
			if at < 0 && !isP2P(e) && groupName(e) == name && e.CollectiveSeqID == seq {
				at = i
			} else if at >= 0 && e.RecordID > v.r.Ops[at].RecordID {
				later = true
			}
		}
		if !later {
			return false
		}
	}
	return true
}
