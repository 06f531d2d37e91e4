package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"millrace/audit"
)

// uncounted is a stretch of time in which a killed run may have had events
// acknowledged without publishing their counts: from its last publication
// to its end. An event is counted in the hour of its own time, which may
// be up to skew away from its acknowledgement.
type uncounted struct {
	run       audit.Run
	from, to  time.Time
	skew      time.Duration
	diedAfter time.Time // when the run was last heard of
}

// covers reports whether events of the hour starting at h may be among
// the ones the run left uncounted.
func (u uncounted) covers(h time.Time) bool {
	return h.Before(u.to.Add(u.skew)) && h.Add(time.Hour).After(u.from.Add(-u.skew))
}

func (u uncounted) String() string {
	return fmt.Sprintf("%s run %s of %s was last heard of at %s and never stopped cleanly, so the events it accepted after its last published count are not counted",
		u.run.Role, u.run.ID, u.run.Instance, u.diedAfter.UTC().Format(time.RFC3339))
}

// killedRuns finds the runs that ended without publishing their last
// counts, per role. A run that never said it stopped is dead once a later
// run of its instance started, or once it missed three heartbeats; one
// that is still heard from is alive and its counts are current.
func killedRuns(runs []audit.Run, now time.Time) map[string][]uncounted {
	byInstance := map[[2]string][]audit.Run{}
	for _, r := range runs {
		if r.Role == audit.RoleSink {
			continue
		}
		k := [2]string{r.Role, r.Instance}
		byInstance[k] = append(byInstance[k], r)
	}
	out := map[string][]uncounted{}
	for k, rs := range byInstance {
		slices.SortFunc(rs, func(a, b audit.Run) int { return cmp.Compare(a.StartedAt.UnixNano(), b.StartedAt.UnixNano()) })
		for i, r := range rs {
			if r.Stopped {
				continue
			}
			heartbeat := time.Duration(max(r.HeartbeatSeconds, 1)) * time.Second
			// The run published its counts at least once a heartbeat and
			// was gone within two of its last record.
			end := r.SeenAt.Add(2 * heartbeat)
			if i+1 < len(rs) {
				end = minTime(end, rs[i+1].StartedAt)
			} else if now.Sub(r.SeenAt) <= 3*heartbeat {
				continue // alive
			}
			out[k[0]] = append(out[k[0]], uncounted{run: r, from: r.SeenAt.Add(-heartbeat), to: end,
				skew: time.Duration(r.SkewSeconds) * time.Second, diedAfter: r.SeenAt})
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
