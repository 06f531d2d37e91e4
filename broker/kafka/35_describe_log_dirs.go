package kafka

// DescribeLogDirs (key 35), versions 0–4.
//
// A broker has one log directory, its data directory (reported as an
// absolute path). The response lists the partitions it holds there, leader
// or follower replicas, with their size on disk: every partition when
// topics is null, else the requested ones this broker holds (others are
// left out, as Kafka does). offset_lag is 0: it measures a future replica
// (a move between directories) against the current one, and millrace never
// has future replicas. Version 4 adds the volume's total and usable bytes.
// Partitions of a topic being deleted are not listed, though their files
// may still be on disk.
//
// On a tiered topic (remote.storage.enable) the size is the local part
// only, as Kafka reports it (kafka-log-dirs.sh shows local segments; the
// remote size is a metric there, KIP-963). Versions 2+ add a tagged field
// with the partition's remote start, end and size (broker/tier/summary.go),
// which Kafka clients skip as any unknown tag and `millrace topic
// describe` shows.

import (
	"context"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/log"
)

func init() { regKey(35, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !b.authorizedCluster(r, acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code // v3+; older versions see no directories
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.logs.DataDir()
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	dir.TotalBytes, dir.UsableBytes = -1, -1
	if total, usable, ok := volumeBytes(dir.Dir); ok {
		dir.TotalBytes, dir.UsableBytes = total, usable
	}

	held := b.logs.All()
	var want map[log.TopicPartition]bool
	if req.Topics != nil {
		want = map[log.TopicPartition]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				want[log.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	byTopic := map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition{}
	for tp, l := range held {
		if want != nil && !want[tp] {
			continue
		}
		if _, _, ok := b.cluster.Partition(tp.Topic, tp.Partition); !ok {
			continue // deleted, its files not yet removed
		}
		p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		p.Partition, p.Size = tp.Partition, l.Size()
		if b.remoteLogDirTags != nil && req.Version >= 2 && l.Config().RemoteStorageEnable {
			p.UnknownTags = b.remoteLogDirTags(tp.Topic, tp.Partition)
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, name := range topics {
		t := kmsg.NewDescribeLogDirsResponseDirTopic()
		t.Topic, t.Partitions = name, byTopic[name]
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
		dir.Topics = append(dir.Topics, t)
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}

// volumeBytes returns the size of the volume holding dir and the bytes free
// for an unprivileged writer on it.
func volumeBytes(dir string) (total, usable int64, ok bool) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, 0, false
	}
	return int64(fs.Blocks) * int64(fs.Bsize), int64(fs.Bavail) * int64(fs.Bsize), true
}
