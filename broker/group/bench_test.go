package group

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkCoordinator measures the hot paths of a Stable group on the
// embedded store: heartbeats (memory only), commits (one store Multi each),
// transactional commits with their marker, and fetches (served from the
// cache).
func BenchmarkCoordinator(b *testing.B) {
	e := newEnv(b, testConfig())
	ctx := context.Background()
	r := e.c.JoinGroup(clientCtx("a"), joinReq(3, "g", "", 10*time.Second, "t"))
	e.c.SyncGroup(ctx, syncReq("g", r.MemberID, r.Generation, map[string][]byte{r.MemberID: consumerAssignment("t", 0)}))

	b.Run("heartbeat", func(b *testing.B) {
		for b.Loop() {
			if code := heartbeat(e.c, "g", r.MemberID, r.Generation); code != errNone {
				b.Fatalf("heartbeat: %d", code)
			}
		}
	})
	for _, partitions := range []int{1, 16} {
		offsets := make(map[int32]int64, partitions)
		for p := range partitions {
			offsets[int32(p)] = 1
		}
		req := commitReq("g", r.MemberID, r.Generation, "t", offsets)
		b.Run("commit/partitions="+strconv.Itoa(partitions), func(b *testing.B) {
			for b.Loop() {
				if codes := commitCodes(e.c.OffsetCommit(ctx, req)); codes[0] != errNone {
					b.Fatalf("commit: %v", codes)
				}
			}
		})
	}
	for _, partitions := range []int{1, 16} {
		offsets := make(map[int32]int64, partitions)
		for p := range partitions {
			offsets[int32(p)] = 1
		}
		// One transaction's offsets: TxnOffsetCommit, then the commit
		// marker making them committed.
		req := txnCommitReq(2, "g", 1, 0, "", -1, "t", offsets)
		b.Run("txn-commit/partitions="+strconv.Itoa(partitions), func(b *testing.B) {
			for b.Loop() {
				if code := e.c.TxnOffsetCommit(ctx, req).Topics[0].Partitions[0].ErrorCode; code != errNone {
					b.Fatalf("txn commit: %d", code)
				}
				if code := e.c.CompleteTxnOffsets(ctx, 1, 0, true, Partition("g")); code != errNone {
					b.Fatalf("marker: %d", code)
				}
			}
		})
	}
	b.Run("fetch", func(b *testing.B) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 7, "g"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		for b.Loop() {
			if resp := e.c.OffsetFetch(ctx, req); resp.ErrorCode != errNone {
				b.Fatalf("fetch: %d", resp.ErrorCode)
			}
		}
	})
}
