package tier

// A partition's remote state, one node of the coordination store:
//
//	/millrace/tier/<topic>/<partition>
//
// holding JSON:
//
//	{"topic_id": "<base64url of the 16-byte topic ID, unpadded; empty without one>",
//	 "leader_epoch": <leader epoch of the last writer>,
//	 "log_start_offset": <first offset readable remotely>,
//	 "segments": [ <Segment>, ... ]}
//
// Segments are in upload order, each with a larger last offset than the
// one before. Segment boundaries differ between replicas, so a leader that
// takes over after another may upload a segment that starts below the
// previous one's end, or even below its base (Kafka uploads such a
// straddling segment whole too): ranges may overlap, and a reader of
// offset o wants the first segment whose last offset is at least o (and o
// at least log_start_offset).
//
// Every write is a compare-and-set on the node's version, so two writers
// (a new leader and its deposed predecessor) cannot interleave, and a
// writer whose leader epoch is older than the state's is refused. The
// state is written only after every object of a new segment is published,
// and a segment leaves it before its objects are removed: whatever a crash
// interrupts, the state references only whole segments, and what it does
// not reference the sweep removes (sweep.go).
//
// Objects are named (keys.go)
//
//	<topic>-<topic ID>/<partition>/<base offset, 20 digits>-<last offset, 20 digits><suffix>
//
// so a re-created topic (a new ID) never meets the old one's objects, and
// a new leader's upload of the same range lands on the same names.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"millrace/broker/coord"
)

// Root is the coordination node under which every partition's remote
// state lives, as Root/<topic>/<partition>.
const Root = "/millrace/tier"

// State is one partition's remote state.
type State struct {
	// TopicID is the topic's ID in base64url without padding (as Kafka
	// prints topic IDs), empty when the cluster has none. A state of
	// another ID belongs to a deleted topic of the same name.
	TopicID string `json:"topic_id"`
	// LeaderEpoch is the leader epoch of the broker that wrote it last.
	LeaderEpoch int32 `json:"leader_epoch"`
	// LogStartOffset is the first offset readable remotely: total
	// retention and DeleteRecords move it up.
	LogStartOffset int64 `json:"log_start_offset"`
	// Segments are the uploaded segments, by base offset.
	Segments []Segment `json:"segments"`
}

// End is the offset below which every record is remote or deleted: the
// last segment's last offset plus one, or the log start offset when that
// is larger (every remote segment expired, or DeleteRecords went past).
func (s State) End() int64 {
	end := s.LogStartOffset
	if n := len(s.Segments); n > 0 {
		end = max(end, s.Segments[n-1].LastOffset+1)
	}
	return end
}

// Size is the total size of the remote segments' .log objects.
func (s State) Size() int64 {
	var n int64
	for _, seg := range s.Segments {
		n += seg.Size
	}
	return n
}

// EncodeTopicID formats a topic ID as State.TopicID does; the zero ID is "".
func EncodeTopicID(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// StatePath is the node of a partition's remote state.
func StatePath(topic string, partition int32) string {
	return Root + "/" + topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// errConflict: another writer changed the state since it was read, or it
// was written by a newer leader epoch.
var errConflict = errors.New("tier: the remote state changed under this writer")

// ReadState reads a partition's remote state and the node's version; a
// missing node is an empty state with exists false.
func ReadState(cs coord.Store, topic string, partition int32) (st State, version int32, exists bool, err error) {
	st, stat, err := readStateAt(cs, StatePath(topic, partition))
	if errors.Is(err, coord.ErrNoNode) {
		return State{}, 0, false, nil
	}
	if err != nil {
		return State{}, 0, false, err
	}
	return st, stat.Version, true, nil
}

// readStateAt reads and decodes the state node at path; a missing node is
// coord.ErrNoNode.
func readStateAt(cs coord.Store, path string) (State, coord.Stat, error) {
	data, stat, err := cs.Get(path)
	if errors.Is(err, coord.ErrNoNode) {
		return State{}, stat, err
	}
	if err != nil {
		return State{}, stat, fmt.Errorf("tier: reading the remote state %s: %w", path, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, stat, fmt.Errorf("tier: the remote state %s is not valid JSON: %w", path, err)
	}
	return st, stat, nil
}

// parsePartition is the partition of a state node's name; -1 for a name
// that is not a number (not written by this package).
func parsePartition(name string) int32 {
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// writeState replaces the state read at version (creating it when it did
// not exist) and returns the new version. It fails with errConflict when
// the node changed since; a writer checks the leader epoch of what it
// read with checkEpoch first.
func writeState(cs coord.Store, topic string, partition int32, st State, version int32, exists bool) (int32, error) {
	path := StatePath(topic, partition)
	data, err := json.Marshal(st)
	if err != nil {
		return 0, fmt.Errorf("tier: encoding the remote state of %s-%d: %w", topic, partition, err)
	}
	if !exists {
		if err := coord.EnsurePath(cs, coord.ParentPath(path)); err != nil {
			return 0, fmt.Errorf("tier: creating %s: %w", coord.ParentPath(path), err)
		}
		if _, err := cs.Create(path, data, coord.Persistent); errors.Is(err, coord.ErrNodeExists) {
			return 0, fmt.Errorf("%w: %s was created by another writer", errConflict, path)
		} else if err != nil {
			return 0, fmt.Errorf("tier: creating %s: %w", path, err)
		}
		return 0, nil
	}
	stat, err := cs.Set(path, data, version)
	if errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNoNode) {
		return 0, fmt.Errorf("%w: %s is no longer at version %d", errConflict, path, version)
	}
	if err != nil {
		return 0, fmt.Errorf("tier: writing %s: %w", path, err)
	}
	return stat.Version, nil
}

// checkEpoch refuses a writer of leader epoch epoch a state last written
// by a newer leader: a deposed leader stops there even before its CAS
// would fail.
func checkEpoch(st State, epoch int32, topic string, partition int32) error {
	if st.LeaderEpoch > epoch {
		return fmt.Errorf("%w: %s-%d was last written at leader epoch %d, this broker leads at %d", errConflict, topic, partition, st.LeaderEpoch, epoch)
	}
	return nil
}

// isConflict reports whether err is a lost compare-and-set.
func isConflict(err error) bool { return errors.Is(err, errConflict) }
