package tier

import (
	"fmt"
	"strconv"
)

// The object names (the format is in state.go's header). A key names an
// offset range, not an uploader: two leaders uploading the same range
// produce the same names, so the second finds store.ErrExists and checks
// the object instead of storing a copy.

// offsetDigits is the width of the offsets in a key, as in the segment
// file names of broker/log.
const offsetDigits = 20

// suffixes are the objects of every segment, in upload order.
var suffixes = []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix, SnapshotSuffix}

// TopicPrefix is the prefix of every object of one topic (one topic ID):
// "<topic>-<topic ID>/", or "<topic>/" without an ID.
func TopicPrefix(topic, topicID string) string {
	if topicID == "" {
		return topic + "/"
	}
	return topic + "-" + topicID + "/"
}

// PartitionPrefix is the prefix of every object of one partition.
func PartitionPrefix(topic, topicID string, partition int32) string {
	return TopicPrefix(topic, topicID) + strconv.FormatInt(int64(partition), 10) + "/"
}

// SegmentKey is the Key of the segment of offsets [base, last].
func SegmentKey(topic, topicID string, partition int32, base, last int64) string {
	return fmt.Sprintf("%s%0*d-%0*d", PartitionPrefix(topic, topicID, partition), offsetDigits, base, offsetDigits, last)
}
