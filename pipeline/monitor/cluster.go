package monitor

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// readCluster makes one pass over the admin API. Only a failed metadata
// request fails the pass; offsets or groups that cannot be read are noted
// in the read's errs and the rest is kept, so one slow coordinator does not
// blank the whole view.
func readCluster(ctx context.Context, adm *kadm.Client, now time.Time) (*clusterRead, error) {
	meta, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	r := &clusterRead{
		at:         now,
		clusterID:  meta.Cluster,
		controller: meta.Controller,
		starts:     make(map[topicPartition]int64),
		ends:       make(map[topicPartition]int64),
		offsetErrs: make(map[topicPartition]string),
	}
	for _, b := range meta.Brokers {
		br := Broker{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		r.brokers = append(r.brokers, br)
	}
	r.readDisks(ctx, adm)
	var names []string
	for _, td := range meta.Topics.Sorted() {
		if td.Err != nil {
			r.errs = append(r.errs, fmt.Sprintf("topic %s: %v", td.Topic, td.Err))
			continue
		}
		names = append(names, td.Topic)
		tr := topicRead{name: td.Topic, internal: td.IsInternal}
		for _, pd := range td.Partitions.Sorted() {
			pr := partitionRead{partition: pd.Partition, leader: pd.Leader, leaderEpoch: pd.LeaderEpoch, replicas: pd.Replicas, isr: pd.ISR}
			if pd.Err != nil {
				pr.err = pd.Err.Error()
			}
			tr.partitions = append(tr.partitions, pr)
		}
		r.topics = append(r.topics, tr)
	}
	// With no topic named kadm would list every topic: with none, skip.
	if len(names) > 0 {
		r.readOffsets(ctx, adm, names)
	}
	r.readGroups(ctx, adm)
	return r, nil
}

// readDisks fills in each broker's log directory from DescribeLogDirs.
func (r *clusterRead) readDisks(ctx context.Context, adm *kadm.Client) {
	ctx, cancel := context.WithTimeout(ctx, DiskTimeout)
	defer cancel()
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		// A shard error still returns what the other brokers answered.
		r.errs = append(r.errs, fmt.Sprintf("log dirs: %v", err))
	}
	for i, b := range r.brokers {
		r.brokers[i].Disk = DiskOf(dirs[b.ID])
	}
}

func (r *clusterRead) readOffsets(ctx context.Context, adm *kadm.Client, names []string) {
	for _, side := range []struct {
		what string
		list func(context.Context, ...string) (kadm.ListedOffsets, error)
		into map[topicPartition]int64
	}{
		{"start offsets", adm.ListStartOffsets, r.starts},
		{"end offsets", adm.ListEndOffsets, r.ends},
	} {
		listed, err := side.list(ctx, names...)
		if err != nil {
			// A shard error still returns what the other brokers answered.
			r.errs = append(r.errs, fmt.Sprintf("%s: %v", side.what, err))
		}
		listed.Each(func(o kadm.ListedOffset) {
			tp := topicPartition{o.Topic, o.Partition}
			if o.Err != nil {
				r.offsetErrs[tp] = o.Err.Error()
				return
			}
			side.into[tp] = o.Offset
		})
	}
}

func (r *clusterRead) readGroups(ctx context.Context, adm *kadm.Client) {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("list groups: %v", err))
		if len(listed) == 0 {
			return
		}
	}
	names := listed.Groups()
	if len(names) == 0 {
		return
	}
	described, err := adm.DescribeGroups(ctx, names...)
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("describe groups: %v", err))
	}
	fetched := adm.FetchManyOffsets(ctx, names...)
	for _, lg := range listed.Sorted() {
		g := groupRead{name: lg.Group, state: lg.State, protocolType: lg.ProtocolType,
			committed: make(map[topicPartition]int64), assigned: make(map[topicPartition]string)}
		if d, ok := described[lg.Group]; ok {
			if d.Err != nil {
				g.err = d.Err.Error()
			} else {
				g.state, g.protocolType, g.members = d.State, d.ProtocolType, len(d.Members)
				for _, m := range d.Members {
					if ca, ok := m.Assigned.AsConsumer(); ok {
						for _, t := range ca.Topics {
							for _, p := range t.Partitions {
								g.assigned[topicPartition{t.Topic, p}] = m.MemberID
							}
						}
					}
				}
			}
		}
		if f, ok := fetched[lg.Group]; ok {
			if f.Err != nil && g.err == "" {
				g.err = f.Err.Error()
			}
			f.Fetched.Each(func(o kadm.OffsetResponse) {
				if o.Err == nil && o.At >= 0 {
					g.committed[topicPartition{o.Topic, o.Partition}] = o.At
				}
			})
		}
		r.groups = append(r.groups, g)
	}
}
