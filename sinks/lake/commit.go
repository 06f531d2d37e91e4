package lake

import (
	"context"
	"time"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/sinks/iceberg"
)

// The commit step of a landed window (doc.go, "Core and worker"): once
// every file of a window is published, its audit counts and dead letters
// acknowledged, the worker hands the window to its committer, and the
// window is landed when commit returns nil. The committer is the one place
// that makes a window's end durable, so another way of committing (a table
// commit whose snapshot carries the offsets) is another implementation of
// this interface; the lander, the publishing and the exactly-once argument
// do not change.

// committer makes a landed window's end durable; the kgo implementation
// commits the group offset, tests use fakes.
type committer interface {
	// commit records that tp is landed up to (not including) wc.next. An
	// error leaves the window uncommitted: the worker stops, and the next
	// owner lands the records again from the last commit.
	commit(ctx context.Context, wc windowCommit) error
}

// windowCommit is what a committer is given: the window's end and
// watermark, and the files it published.
type windowCommit struct {
	tp        topicPartition
	start     int64     // the offset of the window's first record
	next      int64     // the offset after the window's last record
	watermark time.Time // the window's largest record timestamp (zero: none)
	files     []landedFile
	// deadLetterRows are the window's dead letters with Format iceberg,
	// for the topic's dead-letter table; nil with Format hive, whose dead
	// letters were produced and acknowledged before the commit.
	deadLetterRows []iceberg.DeadLetterRow
}

// landedFile is one file a window published, in the order it was opened.
type landedFile struct {
	name        string // its published name (Layout.DataFile)
	bucket      time.Time
	identity    *identityValue // its identity partition value; nil without one
	first, last int64          // offsets of its first and last row
	rows, bytes int64
	// footer is the one its writer wrote, for the table's statistics.
	footer *metadata.FileMetaData
}

// commitTimeout bounds one offset commit.
const commitTimeout = 30 * time.Second

// kgoCommitter commits through the group coordinator with the member's
// current generation, so a member that lost its partitions cannot commit for
// them. It builds the OffsetCommit request itself (rather than
// CommitOffsetsSync) to carry the window's record-time watermark in the
// offset's metadata, which the _SUCCESS markers read back.
type kgoCommitter struct {
	client *kgo.Client
	group  string
}

func (c *kgoCommitter) commit(ctx context.Context, wc windowCommit) error {
	tp, offset := wc.tp, wc.next
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	member, generation := c.client.GroupMetadata()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = c.group, generation, member
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = tp.topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = tp.partition, offset, -1
	md := encodeWatermark(wc.watermark)
	rp.Metadata = &md
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.client)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}
