package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsetsRequest is a ListOffsets of "old"/0 at timestamp.
func listOffsetsRequest(version int16, timestamp int64, timeout time.Duration) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(version)
	req.ReplicaID, req.TimeoutMillis = -1, int32(timeout.Milliseconds())
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "old"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = timestamp, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// ListOffsets by timestamp on a tiered partition finds the first record at
// or after the timestamp in the remote segments first, then in the local
// log, as Kafka's UnifiedLog.fetchOffsetByTimestamp does (KIP-405), with
// the record's timestamp and its batch's leader epoch (KIP-320); earliest
// and latest tiered carry their batch's epoch; max timestamp (KIP-734) looks at
// the local log only, as Kafka's does.
func TestListOffsetsByTimestampOfATieredPartition(t *testing.T) {
	t.Parallel()
	f := startRemoteFixture(t, 10*time.Second)
	c := dial(t, f.tb.addr)
	latest := c.roundTrip(listOffsetsRequest(11, listLatest, 0), 1).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	epoch := latest.LeaderEpoch
	if epoch < 0 {
		t.Fatalf("latest: leader epoch %d", epoch)
	}
	first := f.firstTimestamp
	// The last batch wholly below the local log start, read remotely.
	remote := f.localStart/2 - 1
	for i, tc := range []struct {
		name              string
		timestamp         int64
		offset, recordsAt int64
	}{
		{"before every record", first - 5, 0, first},
		{"a batch's first record", first + 10, 2, first + 10},
		{"inside a batch", first + 11, 3, first + 11},
		{"between batches", first + 12, 4, first + 20},
		{"the last remote batch", first + 10*remote, 2 * remote, first + 10*remote},
		{"a local batch", first + 390, 78, first + 390},
		{"after every record", first + 392, -1, -1},
		{"earliest", listEarliest, 0, -1},
		{"max timestamp", listMaxTimestamp, 79, first + 391},
	} {
		sp := c.roundTrip(listOffsetsRequest(11, tc.timestamp, 0), int32(i+2)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		wantEpoch := epoch
		if tc.offset < 0 {
			wantEpoch = -1
		}
		if sp.ErrorCode != 0 || sp.Offset != tc.offset || sp.Timestamp != tc.recordsAt || sp.LeaderEpoch != wantEpoch {
			t.Errorf("%s: offset %d at %d, epoch %d, error %d; want offset %d at %d, epoch %d",
				tc.name, sp.Offset, sp.Timestamp, sp.LeaderEpoch, sp.ErrorCode, tc.offset, tc.recordsAt, wantEpoch)
		}
	}

	// With the local log emptied past the last remote offset, the last
	// batch is found remotely, and latest tiered carries its epoch.
	if err := f.tb.partitionLog("old", 0).AdvanceStartOffset(f.end); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name              string
		timestamp         int64
		offset, recordsAt int64
	}{
		{"the last batch, remote only", first + 390, 78, first + 390},
		{"latest tiered", listLatestTiered, f.end - 1, -1},
	} {
		sp := c.roundTrip(listOffsetsRequest(11, tc.timestamp, 0), int32(i+100)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != 0 || sp.Offset != tc.offset || sp.Timestamp != tc.recordsAt || sp.LeaderEpoch != epoch {
			t.Errorf("%s: offset %d at %d, epoch %d, error %d; want offset %d at %d, epoch %d",
				tc.name, sp.Offset, sp.Timestamp, sp.LeaderEpoch, sp.ErrorCode, tc.offset, tc.recordsAt, epoch)
		}
	}
}

// A search by timestamp that the store does not answer within the
// request's timeout (v10+) answers REQUEST_TIMED_OUT, as Kafka's delayed
// remote ListOffsets does when it expires; earliest still answers its
// offset, without the epoch; once the store answers, so does the search.
func TestListOffsetsByTimestampWhenTheStoreIsSlow(t *testing.T) {
	t.Parallel()
	f := startRemoteFixture(t, 50*time.Millisecond)
	release := f.store.Hold()
	defer release()
	c := dial(t, f.tb.addr)
	sp := c.roundTrip(listOffsetsRequest(10, f.firstTimestamp+10, 50*time.Millisecond), 1).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.RequestTimedOut.Code || sp.Offset != -1 {
		t.Errorf("search of a held store: offset %d, error %d; want REQUEST_TIMED_OUT", sp.Offset, sp.ErrorCode)
	}
	sp = c.roundTrip(listOffsetsRequest(10, listEarliest, 0), 2).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 || sp.Offset != 0 || sp.LeaderEpoch != -1 {
		t.Errorf("earliest of a held store: offset %d, epoch %d, error %d; want 0, -1, none", sp.Offset, sp.LeaderEpoch, sp.ErrorCode)
	}
	release()
	sp = c.roundTrip(listOffsetsRequest(10, f.firstTimestamp+10, 10*time.Second), 3).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 || sp.Offset != 2 {
		t.Errorf("search once the store answers: offset %d, error %d; want 2", sp.Offset, sp.ErrorCode)
	}
}
