package e2e

// Transactional offset commits in a 3-broker ZooKeeper cluster: the
// offsets a transaction commits for a group stay invisible until the
// transaction ends, also when the group's coordinator is SIGKILLed between
// the TxnOffsetCommit and the end of the transaction.

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

// TestTxnOffsetsSurviveGroupCoordinatorKill: an aborted transaction's
// offsets never show; a committed one's show once its transaction ends, on
// the broker that took the group over from its SIGKILLed coordinator and
// on that broker once restarted.
func TestTxnOffsetsSurviveGroupCoordinatorKill(t *testing.T) {
	t.Parallel()
	const topic, txnID = "txoff", "txoff-producer"
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, 1)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	coordinator := func(key string, typ int8) int32 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorType = 2, key, typ
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			return -1
		}
		return resp.NodeID
	}
	// A group coordinated by another broker than the transaction: killing
	// the group's coordinator leaves the transaction coordinator alone.
	var txnCoordinator int32 = -1
	waitfor.Until(c.t, 30*time.Second, "the transaction coordinator", func() bool {
		txnCoordinator = coordinator(txnID, 1)
		return txnCoordinator >= 0
	})
	group, groupCoordinator := "", int32(-1)
	for i := 0; groupCoordinator < 0 || groupCoordinator == txnCoordinator; i++ {
		group = fmt.Sprintf("txoff-group-%d", i)
		groupCoordinator = coordinator(group, 0)
	}

	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.TransactionalID, init.TransactionTimeoutMillis = 4, kmsg.StringPtr(txnID), 60000
	var producerID int64
	var epoch int16
	waitfor.Until(c.t, 30*time.Second, "InitProducerId", func() bool {
		resp, err := init.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		producerID, epoch = resp.ProducerID, resp.ProducerEpoch
		return true
	})

	// One transaction: offsets added, committed to the group, then ended.
	transact := func(offset int64, commit bool, beforeEnd func()) {
		t.Helper()
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, producerID, epoch, group
		add.Version = 3
		waitfor.Until(c.t, 30*time.Second, "AddOffsetsToTxn", func() bool {
			resp, err := add.RequestWith(ctx, cl)
			return err == nil && resp.ErrorCode == 0
		})
		commitReq := kmsg.NewPtrTxnOffsetCommitRequest()
		commitReq.Version, commitReq.TransactionalID, commitReq.Group = 3, txnID, group
		commitReq.ProducerID, commitReq.ProducerEpoch, commitReq.Generation = producerID, epoch, -1
		commitReq.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic,
			Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		resp, err := commitReq.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
		}
		beforeEnd()
		end := kmsg.NewPtrEndTxnRequest()
		end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, txnID, producerID, epoch, commit
		waitfor.Until(c.t, 30*time.Second, "EndTxn", func() bool {
			resp, err := end.RequestWith(ctx, cl)
			return err == nil && resp.ErrorCode == 0
		})
	}
	// stable fetches the group's offset with require_stable from its
	// coordinator (the client finds it, and picks v8+'s form of groups).
	stable := func() (int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group, req.RequireStable = group, true
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		code, partitions := resp.ErrorCode, []kmsg.OffsetFetchResponseTopicPartition(nil)
		if len(resp.Topics) > 0 {
			partitions = resp.Topics[0].Partitions
		}
		if len(resp.Groups) > 0 { // kgo fills both forms from v8
			code, partitions = resp.Groups[0].ErrorCode, nil
			for _, rt := range resp.Groups[0].Topics {
				for _, p := range rt.Partitions {
					partitions = append(partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset, ErrorCode: p.ErrorCode})
				}
			}
		}
		if err := kerr.ErrorForCode(code); err != nil {
			return 0, err
		}
		if len(partitions) != 1 {
			return 0, fmt.Errorf("OffsetFetch answered %+v", resp)
		}
		return partitions[0].Offset, kerr.ErrorForCode(partitions[0].ErrorCode)
	}
	waitOffset := func(what string, want int64) {
		t.Helper()
		waitfor.Until(c.t, time.Minute, what, func() bool {
			got, err := stable()
			return err == nil && got == want
		})
	}

	transact(10, false, func() {
		if _, err := stable(); err != kerr.UnstableOffsetCommit {
			t.Fatalf("stable fetch during the transaction: %v, want UNSTABLE_OFFSET_COMMIT", err)
		}
	})
	waitOffset("the aborted transaction's end", -1)

	transact(42, true, func() {
		c.signal(groupCoordinator, syscall.SIGKILL)
		waitfor.Until(c.t, time.Minute, "the group to move", func() bool {
			id := coordinator(group, 0)
			return id >= 0 && id != groupCoordinator
		})
		// The client may still dial the dead broker first; no answer may
		// show the offset before the transaction ends.
		waitfor.Until(c.t, time.Minute, "UNSTABLE_OFFSET_COMMIT from the new coordinator", func() bool {
			offset, err := stable()
			if err == nil {
				t.Fatalf("the new coordinator shows offset %d before the transaction ended", offset)
			}
			return err == kerr.UnstableOffsetCommit
		})
	})
	waitOffset("the committed offset at the new coordinator", 42)

	// The killed broker returns and takes its groups back; it reads the
	// offsets its successor completed.
	c.restart(groupCoordinator)
	waitfor.Until(c.t, time.Minute, "the group to come back", func() bool { return coordinator(group, 0) == groupCoordinator })
	waitOffset("the committed offset at the restarted coordinator", 42)
}
