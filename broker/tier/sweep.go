package tier

// The sweep. An upload publishes a segment's objects before the state
// records them, so a crash (or a lost CAS) in between leaves objects no
// state references; so does a crash between a state write that drops
// segments and the removal of their objects. The leader of a partition
// sweeps its prefix when it takes the leadership and then every
// millrace.remote.storage.sweep.grace.ms: it discards unpublished
// leftovers (store.Cleanup) and removes every published object that the
// state does not reference and that is older than the grace, so an upload
// still under way elsewhere (a deposed leader that has not noticed) keeps
// its objects until it can record them.
//
// A deleted topic's remote data is removed by the controller: every state
// whose topic no longer exists, or exists under another ID, and that has
// not changed for the grace (the controller's model of the topics may lag
// a creation elsewhere), loses its objects and then its node.
//
// A topic can also have objects but no state: its leader published a
// segment's objects and crashed (or was stopped) before the first state
// write, and the topic was deleted before any leader recorded an upload.
// No state names that prefix, so every broker remembers each topic's ID
// from round to round; a (name, ID) that is gone is noted, and once it
// has been gone for the grace the controller removes every object under
// its topic prefix older than the grace, state or no state. The memory is
// the broker's: a controller that started after the deletion does not know
// the old ID, and such objects are then left (docs/tiered-storage.md).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"millrace/broker/coord"
	"millrace/broker/log"
)

// sweepIfDue sweeps w's partition on a new leadership or once the grace
// has passed since its last sweep.
func (m *Manager) sweepIfDue(ctx context.Context, w *writer) error {
	tp := log.TopicPartition{Topic: w.p.Topic, Partition: w.p.Partition}
	now := m.now()
	m.mu.Lock()
	mark, ok := m.swept[tp]
	due := !ok || mark.epoch != w.p.LeaderEpoch || now.Sub(mark.at) >= m.cfg.SweepGrace
	if due {
		// Marked before sweeping: a failing store is retried after the
		// grace, not every round.
		m.swept[tp] = sweepMark{epoch: w.p.LeaderEpoch, at: now}
	}
	m.mu.Unlock()
	if !due {
		return nil
	}
	_, err := m.sweep(ctx, PartitionPrefix(w.p.Topic, w.topicID, w.p.Partition), w.state)
	return err
}

// sweep removes what a crash left under prefix that st does not reference
// and returns how many objects it removed.
func (m *Manager) sweep(ctx context.Context, prefix string, st State) (int, error) {
	if _, err := m.store.Cleanup(ctx, prefix, nil); err != nil {
		return 0, fmt.Errorf("tier: discarding unpublished objects under %s: %w", prefix, err)
	}
	objects, err := m.store.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("tier: listing %s: %w", prefix, err)
	}
	referenced := map[string]bool{}
	for _, s := range st.Segments {
		for _, suffix := range suffixes {
			referenced[s.Key+suffix] = true
		}
	}
	cutoff := m.now().Add(-m.cfg.SweepGrace)
	removed := 0
	for _, o := range objects {
		if referenced[o.Name] || !o.ModTime.Before(cutoff) {
			continue
		}
		if err := m.store.Remove(ctx, o.Name); err != nil {
			return removed, fmt.Errorf("tier: removing the unreferenced object %s: %w", o.Name, err)
		}
		m.logger.Info("removed an unreferenced remote object", "object", o.Name, "modified", o.ModTime)
		m.metrics.sweptObjects.Inc()
		removed++
	}
	return removed, nil
}

// removeDeletedTopics removes the remote data of topics that are gone.
func (m *Manager) removeDeletedTopics(ctx context.Context, topics map[string][16]byte) error {
	names, err := m.coord.Children(Root)
	if errors.Is(err, coord.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tier: listing %s: %w", Root, err)
	}
	var errs []error
	for _, topic := range names {
		id, exists := topics[topic]
		if err := m.removeDeletedTopic(ctx, topic, EncodeTopicID(id), exists); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeDeletedTopic removes the stale partition states of one topic name
// (those not of currentID, or all when the topic does not exist) with
// their objects, and the topic's node once it is empty.
func (m *Manager) removeDeletedTopic(ctx context.Context, topic, currentID string, exists bool) error {
	topicPath := Root + "/" + topic
	partitions, err := m.coord.Children(topicPath)
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		return fmt.Errorf("tier: listing %s: %w", topicPath, err)
	}
	cutoff := m.now().Add(-m.cfg.SweepGrace)
	kept := 0
	for _, name := range partitions {
		path := topicPath + "/" + name
		st, stat, err := readStateAt(m.coord, path)
		if errors.Is(err, coord.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		if (exists && st.TopicID == currentID) || !stat.Modified.Before(cutoff) {
			kept++
			continue
		}
		prefix := PartitionPrefix(topic, st.TopicID, parsePartition(name))
		if err := m.removePrefix(ctx, prefix); err != nil {
			return err
		}
		if err := m.coord.Delete(path, stat.Version); err != nil && !errors.Is(err, coord.ErrNoNode) {
			// ErrBadVersion: written since; judged again next round.
			return fmt.Errorf("tier: deleting the remote state %s: %w", path, err)
		}
		m.logger.Info("removed the remote data of a deleted topic", "topic", topic, "topic_id", st.TopicID, "partition", name)
	}
	if kept == 0 {
		if err := m.coord.Delete(topicPath, coord.AnyVersion); err != nil && !errors.Is(err, coord.ErrNoNode) && !errors.Is(err, coord.ErrNotEmpty) {
			return fmt.Errorf("tier: deleting %s: %w", topicPath, err)
		}
	}
	return nil
}

// removePrefix removes every object, published or not, under prefix.
func (m *Manager) removePrefix(ctx context.Context, prefix string) error {
	if _, err := m.store.Cleanup(ctx, prefix, nil); err != nil {
		return fmt.Errorf("tier: discarding unpublished objects under %s: %w", prefix, err)
	}
	objects, err := m.store.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("tier: listing %s: %w", prefix, err)
	}
	for _, o := range objects {
		if err := m.store.Remove(ctx, o.Name); err != nil {
			return fmt.Errorf("tier: removing %s: %w", o.Name, err)
		}
	}
	return nil
}

// noteVanished compares the existing topics with those of the last round
// and notes the topic prefix of each (name, ID) that is gone since.
func (m *Manager) noteVanished(topics map[string][16]byte) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, id := range m.topics {
		if current, ok := topics[name]; !ok || EncodeTopicID(current) != id {
			prefix := TopicPrefix(name, id)
			if _, noted := m.vanished[prefix]; !noted {
				m.vanished[prefix] = now
			}
		}
	}
	clear(m.topics)
	for name, id := range topics {
		m.topics[name] = EncodeTopicID(id)
		// A topic back under a prefix noted gone (the model lagged) is
		// not deleted after all.
		delete(m.vanished, TopicPrefix(name, EncodeTopicID(id)))
	}
}

// removeVanished removes, for each topic gone for the grace, the objects
// under its prefix older than the grace, and forgets the topic once
// nothing is left there.
func (m *Manager) removeVanished(ctx context.Context, topics map[string][16]byte) error {
	now := m.now()
	live := map[string]bool{}
	for name, id := range topics {
		live[TopicPrefix(name, EncodeTopicID(id))] = true
	}
	m.mu.Lock()
	due := map[string]time.Time{}
	for prefix, since := range m.vanished {
		if !live[prefix] && now.Sub(since) >= m.cfg.SweepGrace {
			due[prefix] = since
		}
	}
	m.mu.Unlock()
	var errs []error
	for prefix := range due {
		left, err := m.removeOlder(ctx, prefix, now.Add(-m.cfg.SweepGrace))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if left == 0 {
			m.mu.Lock()
			delete(m.vanished, prefix)
			m.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// removeOlder discards the unpublished leftovers under prefix and removes
// its published objects last modified before cutoff, returning how many
// younger ones it left.
func (m *Manager) removeOlder(ctx context.Context, prefix string, cutoff time.Time) (left int, err error) {
	if _, err := m.store.Cleanup(ctx, prefix, nil); err != nil {
		return 0, fmt.Errorf("tier: discarding unpublished objects under %s: %w", prefix, err)
	}
	objects, err := m.store.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("tier: listing %s: %w", prefix, err)
	}
	for _, o := range objects {
		if !o.ModTime.Before(cutoff) {
			left++
			continue
		}
		if err := m.store.Remove(ctx, o.Name); err != nil {
			return 0, fmt.Errorf("tier: removing %s: %w", o.Name, err)
		}
		m.logger.Info("removed an object of a deleted topic", "object", o.Name)
		m.metrics.sweptObjects.Inc()
	}
	return left, nil
}
