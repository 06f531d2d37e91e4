package audit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// KindRun marks a Run in the audit topic (count records have no kind).
const KindRun = "run"

// Run is the life of one process run of a publisher, on the audit topic
// beside the counts. It tells the reconciler two things the counts cannot:
//
//   - A beacon's and an intake's counts live in memory, so each process run
//     counts from zero under its own run id (Record.Run) and the runs'
//     totals add up. A run publishes its Run when it starts, again at least
//     every Heartbeat, and a last time with Stopped once every count was
//     acknowledged at a clean shutdown. A run that was killed (SIGKILL, a
//     crash, a power cut) never publishes Stopped: the events the broker
//     acknowledged after its last published counts are not counted
//     anywhere, and the reconciler says "unknown" for the hours they may
//     fall in instead of reporting rows it cannot attribute as a mismatch.
//   - A sink publishes a Run when it starts with the topics it lands and
//     the lake it lands them in (Lake), so the audit knows which topics a
//     lake should hold and can report a topic that no sink lands.
type Run struct {
	Kind     string `json:"kind"` // KindRun
	Role     string `json:"role"`
	Instance string `json:"instance"`
	ID       string `json:"run"`
	// Topics are the data topics a sink lands (agents leave it empty: their
	// topics are in their count records).
	Topics []string `json:"topics,omitempty"`
	// Lake is the URL of the lake a sink lands into (CanonicalLake).
	Lake string `json:"lake,omitempty"`
	// SkewSeconds is how far an agent's event time (which picks the hour it
	// is counted in) may be from the moment it was acknowledged; the hours
	// a killed run may have left uncounted reach this far around its end.
	SkewSeconds int64 `json:"skew_seconds,omitempty"`
	// HeartbeatSeconds is how often a running agent republishes its Run;
	// one not seen for three of them is taken for dead.
	HeartbeatSeconds int64     `json:"heartbeat_seconds,omitempty"`
	StartedAt        time.Time `json:"started_at"`
	// SeenAt is when this record was published.
	SeenAt time.Time `json:"seen_at"`
	// Stopped says the run ended cleanly with every count acknowledged.
	Stopped bool `json:"stopped,omitempty"`
}

// Key is the record key of a run: "run/<role>/<instance>/<id>"; the last
// record of a key is the run's state.
func (r *Run) Key() string { return KindRun + "/" + r.Role + "/" + r.Instance + "/" + r.ID }

// Marshal encodes the run's value as JSON.
func (r *Run) Marshal() ([]byte, error) {
	r.Kind = KindRun
	return json.Marshal(r)
}

// Validate reports what is wrong with a run record, if anything.
func (r *Run) Validate() error {
	switch r.Role {
	case RoleBeacon, RoleIntake, RoleTail, RoleSink:
	default:
		return fmt.Errorf("audit: run of unknown role %q", r.Role)
	}
	if r.Instance == "" || r.ID == "" || r.StartedAt.IsZero() || r.SeenAt.IsZero() {
		return errors.New("audit: run lacks an instance, id or time")
	}
	if r.Role == RoleSink && (r.Lake == "" || len(r.Topics) == 0) {
		return errors.New("audit: sink run without its lake or topics")
	}
	if r.SkewSeconds < 0 || r.HeartbeatSeconds < 0 {
		return errors.New("audit: run has a negative duration")
	}
	return nil
}

// NewRunID makes the id of a process run: its start time in milliseconds
// (base 36, so ids of one instance sort by start) and 4 random bytes.
func NewRunID(start time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24+)
	return strconv.FormatInt(start.UnixMilli(), 36) + "-" + hex.EncodeToString(r[:])
}
