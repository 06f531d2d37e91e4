package group

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Commits, heartbeats and admin calls racing on one group keep every
// partition's last committed offset (run with -race).
func TestConcurrentCommitsAndAdmin(t *testing.T) {
	e := newEnv(t, testConfig())
	id := stableGroup(t, e, "g", 10*time.Second)
	const workers, commits = 4, 25
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(partition int32) {
			defer wg.Done()
			for i := 1; i <= commits; i++ {
				resp := e.c.OffsetCommit(context.Background(), commitReq("g", id, 1, "t", map[int32]int64{partition: int64(i)}))
				if codes := commitCodes(resp); codes[0] != errNone {
					t.Errorf("commit p%d #%d: %v", partition, i, codes)
					return
				}
				if code := heartbeat(e.c, "g", id, 1); code != errNone {
					t.Errorf("heartbeat: %d", code)
					return
				}
			}
		}(int32(w))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < commits; i++ {
			e.c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest())
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{"g", "other"}
			e.c.DescribeGroups(context.Background(), r)
		}
	}()
	wg.Wait()
	for p := int32(0); p < workers; p++ {
		if got := fetchOffset(t, e.c, "g", "t", p); got != commits {
			t.Fatalf("t/%d = %d, want %d", p, got, commits)
		}
	}
}

// Many members joining at once all end up in one generation with one
// leader, whatever the interleaving.
func TestManyMembersConverge(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 30 * time.Millisecond
	e := newEnv(t, cfg)
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.c.JoinGroup(clientCtx("c"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID
	}
	// Each member keeps rejoining until it sees a generation of n members,
	// as a client does after REBALANCE_IN_PROGRESS.
	type result struct {
		generation int32
		leader     string
	}
	results := make(chan result, n)
	for _, id := range ids {
		go func(id string) {
			for {
				r := e.c.JoinGroup(clientCtx("c"), joinReq(9, "g", id, 10*time.Second, "t"))
				if r.ErrorCode != errNone {
					results <- result{generation: -1}
					return
				}
				if d := describe(t, e.c, "g"); len(d.Members) == n && r.Generation > 0 {
					hb := heartbeat(e.c, "g", id, r.Generation)
					if hb == errNone {
						results <- result{r.Generation, r.LeaderID}
						return
					}
				}
			}
		}(id)
	}
	var first result
	for i := 0; i < n; i++ {
		r := recv(t, results)
		if r.generation < 0 {
			t.Fatal("a join failed")
		}
		if i == 0 {
			first = r
		} else if r != first {
			t.Fatalf("members disagree: %+v vs %+v", r, first)
		}
	}
}
