package lake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/store"
)

// Zombie-proof publishing (doc.go, "Superseded owners"): before every
// publish and every removal the worker asks the group coordinator whether
// the member the partition was assigned to is still current, publishes without ever
// replacing a name, and, the first time it opens a bucket of a partition
// after the assignment, removes the files an earlier owner published there
// past the committed offset.

// errFenced says the coordinator no longer knows the worker's member or
// generation: its partitions may belong to another member already.
var errFenced = errors.New("lake: this worker is no longer a member of the group's current generation")

// ownershipChecker tells whether the worker still owns what its client
// thinks it owns; the kgo implementation is below, tests use fakes.
type ownershipChecker interface {
	// check returns nil while member — the id the partition was assigned
	// to — is the client's member and current with the client's generation,
	// errFenced (wrapped) when it is not, and another error when the
	// coordinator cannot tell.
	check(ctx context.Context, member string) error
}

// fenceTimeout bounds one ownership check.
const fenceTimeout = 10 * time.Second

// kgoOwnership checks with a Heartbeat of the member and generation the
// client holds: the coordinator answers it exactly as it would the commit
// that follows the publish, and it costs one round trip. The member must be
// the one the partition was assigned to: a client whose member was removed
// (its session expired) notices it on its own heartbeat and rejoins under a
// new id, possibly before the worker, which holds its landing lock through
// the publish, has run the lost-partitions callback. A rebalance in
// progress still counts as owning: the coordinator gives no partition of a
// member to another before that member rejoined or its session expired,
// which is also why a revoked partition may still be landed.
type kgoOwnership struct {
	client *kgo.Client
	group  string
}

func (k *kgoOwnership) check(ctx context.Context, assigned string) error {
	ctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	member, generation := k.client.GroupMetadata()
	if member == "" || generation < 0 {
		return fmt.Errorf("%w (not joined)", errFenced)
	}
	if member != assigned {
		return fmt.Errorf("%w (assigned to member %s, the client is now member %s)", errFenced, assigned, member)
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = k.group, member, generation
	resp, err := req.RequestWith(ctx, k.client)
	if err != nil {
		return fmt.Errorf("lake: checking the group generation: %w", err)
	}
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case err == nil, errors.Is(err, kerr.RebalanceInProgress):
		return nil
	case errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.FencedInstanceID):
		return fmt.Errorf("%w (member %s, generation %d: %v)", errFenced, member, generation, err)
	default:
		return fmt.Errorf("lake: checking the group generation: %w", err)
	}
}

// checkOwnership runs the check for p; a worker without a checker
// (tests) always owns its partitions.
// The caller holds w.landing.
func (w *Worker) checkOwnership(ctx context.Context, p *partitionState) error {
	if w.fence == nil {
		return nil
	}
	return w.fence.check(ctx, p.member)
}

// memberID is the client's group member id, "" without a client (tests) or
// before joining.
func (w *Worker) memberID() string {
	if w.client == nil {
		return ""
	}
	member, _ := w.client.GroupMetadata()
	return member
}

// publishFile publishes a closed file of p's window under its final
// name, which carries its row range, after checking that the worker still
// owns p. When it does not, nothing is published and the error wraps
// errFenced: like a failed commit, it stops the worker, whose next start
// reads from the committed offsets. Going on would be wrong even if the
// partition were still ours: the client's fetch position is past the
// discarded window, so a later window's commit would skip its records. A
// name that exists holds the same rows (see doc.go), so it counts as
// published.
// The caller holds w.landing.
func (w *Worker) publishFile(ctx context.Context, p *partitionState, win *window, f *outFile) error {
	final := w.layout.DataFile(p.tp.topic, f.bucket, p.tp.partition, f.first, f.last)
	if w.cfg.BeforePublish != nil {
		w.cfg.BeforePublish(final)
	}
	if err := w.checkOwnership(ctx, p); err != nil {
		if errors.Is(err, errFenced) {
			w.logger.Warn("publish refused: the partition has moved to another member; the window is discarded",
				"topic", p.tp.topic, "partition", p.tp.partition, "start", win.start, "next", win.next,
				"file", final, "err", err)
		}
		return fmt.Errorf("lake: publish %s: %w", final, err)
	}
	err := f.obj.PublishAs(ctx, final)
	if errors.Is(err, store.ErrExists) {
		w.logger.Info("file already published with the same rows", "name", final)
		err = nil
	}
	if err != nil {
		return fmt.Errorf("lake: publish %s: %w", final, err)
	}
	f.name = final
	return nil
}

// clearSuperseded is called before p's window opens its first file
// in bucket since the assignment (the lander tells when): it removes p's
// files in the bucket whose row range ends at or after start, the window's
// start (the committed offset). No owner committed them: a crashed attempt
// published them, or a paused former owner did after losing p; their rows
// are landed again by this owner, under names that may differ when the cuts
// do. The files are listed, then the ownership checked, then removed, so a
// paused former owner never removes a file the new owner published.
// The caller holds w.landing.
func (w *Worker) clearSuperseded(ctx context.Context, p *partitionState, bucket time.Time, start int64) error {
	dir := w.layout.Dir(p.tp.topic, bucket) + "/"
	objs, err := w.store.List(ctx, w.layout.PartitionFiles(p.tp.topic, bucket, p.tp.partition))
	if err != nil {
		return fmt.Errorf("lake: listing %s for a superseded owner's files: %w", dir, err)
	}
	var stale []string
	for _, o := range objs {
		partition, _, last, ok := ParseFileName(o.Name[lastSlash(o.Name)+1:])
		if ok && partition == p.tp.partition && last >= start {
			stale = append(stale, o.Name)
		}
	}
	if len(stale) > 0 {
		if err := w.checkOwnership(ctx, p); err != nil {
			return fmt.Errorf("lake: not removing %d files past offset %d in %s: %w", len(stale), start, dir, err)
		}
		for _, name := range stale {
			if err := w.store.Remove(ctx, name); err != nil {
				return fmt.Errorf("lake: removing %s: %w", name, err)
			}
			w.logger.Warn("removed a file published past the committed offset by a superseded owner",
				"topic", p.tp.topic, "partition", p.tp.partition, "committed", start, "name", name)
		}
	}
	return nil
}
