package replica

// The follower side: where to truncate before fetching from a new leader
// (KIP-101 and KIP-279), and the small rules of a follower's fetch loop.
//
// On becoming follower at a new epoch, the broker asks the leader
// (OffsetForLeaderEpoch) for the end offset of its own latest epoch, feeds
// the answer to TruncationFor, and carries out the Truncation: either truncate
// the log to Offset and fetch from there, or ask again for an older epoch.
// Truncating by epoch instead of by high watermark is what keeps logs from
// diverging: an old leader's unreplicated tail, written in an epoch the new
// leader never saw, is cut exactly where the new leader's history departs.

// EpochLog is what TruncationFor reads of the local log; *log.Log has it.
type EpochLog interface {
	// LatestEpoch is the newest leader epoch in the log, -1 if none.
	LatestEpoch() int32
	// EndOffsetForEpoch answers OffsetForLeaderEpoch locally: the largest
	// epoch at or below the one asked for and the offset where it ends, or
	// (-1, -1) when the epoch is unknown.
	EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64)
	// EndOffset is the log end offset.
	EndOffset() int64
}

// UndefinedEpoch is OffsetForLeaderEpoch's "unknown epoch" (and its offset,
// UndefinedEpochOffset), as in broker/log.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// EpochEndOffset is a leader's OffsetForLeaderEpoch answer for one
// partition (error-free; errors are retried by the caller).
type EpochEndOffset struct {
	LeaderEpoch int32
	EndOffset   int64
}

// Truncation is the follower's decision.
type Truncation struct {
	// Offset is where to truncate the log (TruncateTo; a no-op when it is the
	// log end offset) and then fetch from. Meaningless when AskAgain.
	Offset int64
	// AskAgain: the leader's answer names an epoch this log does not have;
	// send OffsetForLeaderEpoch again for Epoch (KIP-279's extra round
	// trip) and call TruncationFor with the new answer.
	AskAgain bool
	Epoch    int32
}

// RequestEpoch is the epoch to ask the leader about first: the log's latest,
// or UndefinedEpoch when the log has none (then no request is needed; call
// TruncationFor with an UndefinedEpoch answer).
func RequestEpoch(local EpochLog) int32 { return local.LatestEpoch() }

// TruncationFor decides where a follower truncates given the leader's answer
// for the epoch it asked about.
//
//   - The leader does not know the epoch (or the log has none): truncate to
//     the high watermark, the pre-KIP-101 rule, the best left.
//   - The leader has the epoch, or a smaller one this log also has: truncate
//     to the smaller of the two ends of that epoch. Up to there both logs
//     were written by the same leaders, so they hold the same records.
//   - The leader answered with an epoch this log lacks: ask again for the
//     largest epoch this log has below it. Epochs strictly decrease from
//     round to round, so this ends.
//
// The offset never exceeds the local log end offset.
func TruncationFor(local EpochLog, highWatermark int64, answer EpochEndOffset) Truncation {
	end := local.EndOffset()
	if answer.LeaderEpoch == UndefinedEpoch || answer.EndOffset == UndefinedEpochOffset || local.LatestEpoch() == UndefinedEpoch {
		return Truncation{Offset: clampOffset(highWatermark, end)}
	}
	localEpoch, localEnd := local.EndOffsetForEpoch(answer.LeaderEpoch)
	switch {
	case localEpoch == answer.LeaderEpoch:
		return Truncation{Offset: clampOffset(min(localEnd, answer.EndOffset), end)}
	case localEpoch == UndefinedEpoch || localEnd == UndefinedEpochOffset || localEpoch > answer.LeaderEpoch:
		// Every local epoch is newer than the leader's answer: the log
		// shares no epoch with the leader; fall back to the high watermark.
		return Truncation{Offset: clampOffset(highWatermark, end)}
	default:
		return Truncation{AskAgain: true, Epoch: localEpoch}
	}
}

// FollowerHighWatermark is a follower's high watermark after a fetch: the
// leader's, but never beyond what the follower itself holds.
func FollowerHighWatermark(leaderHighWatermark, localEnd int64) int64 {
	return clampOffset(leaderHighWatermark, localEnd)
}

// OutOfRange decides what a follower does when the leader answered a fetch
// with OFFSET_OUT_OF_RANGE, given the leader's log start and end offsets
// (from ListOffsets). Beyond the leader's end (possible only after an
// unclean election) it truncates to that end; before the leader's start
// (retention deleted what it lacks) it empties its log and starts at the
// leader's start. truncateTo < 0 means no truncation; fullReset means delete
// everything and restart the log at fetchFrom.
func OutOfRange(localEnd, leaderStart, leaderEnd int64) (truncateTo, fetchFrom int64, fullReset bool) {
	switch {
	case localEnd > leaderEnd:
		return leaderEnd, leaderEnd, false
	case localEnd < leaderStart:
		return -1, leaderStart, true
	default:
		return -1, localEnd, false // a transient race; fetch again
	}
}

func clampOffset(offset, end int64) int64 {
	return max(0, min(offset, end))
}
