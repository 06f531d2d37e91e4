// Package tier keeps a topic's closed log segments in object storage and
// reads them back (Kafka's tiered storage, KIP-405): the leader uploads each
// closed segment with its indexes and producer snapshot, the partition's
// remote state lives in the coordination store, local disk keeps the recent
// tail, and a fetch below the local log start is served from the store
// through a bounded cache of segment chunks.
//
// The log package knows only that a segment may be deleted locally once it
// is uploaded; everything remote is here.
package tier

// Segment is one uploaded segment as its partition's remote state records
// it, written only after all of its objects are stored.
type Segment struct {
	// BaseOffset and LastOffset are the offsets of its first and last
	// record (LastOffset is the segment's next offset minus one).
	BaseOffset int64 `json:"base_offset"`
	LastOffset int64 `json:"last_offset"`
	// LeaderEpoch is the leader epoch of the broker that uploaded it.
	LeaderEpoch int32 `json:"leader_epoch"`
	// MaxTimestamp is its largest record timestamp, -1 if none; time
	// retention of remote data goes by it.
	MaxTimestamp int64 `json:"max_timestamp"`
	// Size is the length of its .log object in bytes.
	Size int64 `json:"size"`
	// Key names its objects: each is Key followed by one of the suffixes
	// below. The objects are the local files copied byte for byte, so the
	// log package's formats read them.
	Key string `json:"key"`
}

// The objects of one segment, by suffix.
const (
	LogSuffix       = ".log"       // the record batches
	IndexSuffix     = ".index"     // the offset index
	TimeIndexSuffix = ".timeindex" // the time index
	TxnIndexSuffix  = ".txnindex"  // aborted transactions (may be empty)
	SnapshotSuffix  = ".snapshot"  // producer state as of the segment's end
)
