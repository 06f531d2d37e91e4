package monitor

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
	// The other reads go to different brokers (each broker for its log
	// directories, the partition leaders, the group coordinators) and run
	// at once, each bounded by ReadTimeout, so a hung broker costs one
	// bound, not three.
	var (
		reads                           sync.WaitGroup
		diskErrs, offsetErrs, groupErrs []string
	)
	reads.Go(func() { diskErrs = r.readDisks(ctx, adm) })
	// With no topic named kadm would list every topic: with none, skip.
	if len(names) > 0 {
		reads.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
			defer cancel()
			offsetErrs = r.readOffsets(ctx, adm, names)
		})
	}
	reads.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
		defer cancel()
		groupErrs = r.readGroups(ctx, adm)
	})
	reads.Wait()
	r.errs = slices.Concat(r.errs, diskErrs, offsetErrs, groupErrs)
	return r, nil
}

// readDisks fills in each broker's log directory from DescribeLogDirs and
// returns what failed.
func (r *clusterRead) readDisks(ctx context.Context, adm *kadm.Client) (errs []string) {
	ids := make([]int32, len(r.brokers))
	for i, b := range r.brokers {
		ids[i] = b.ID
	}
	dirs, err := ReadLogDirs(ctx, adm, ids, nil)
	if err != nil {
		errs = append(errs, fmt.Sprintf("log dirs: %v", err))
	}
	for i, b := range r.brokers {
		r.brokers[i].Disk = DiskOf(dirs[b.ID])
	}
	return errs
}

// readOffsets lists the partitions' start and end offsets and returns what
// failed.
func (r *clusterRead) readOffsets(ctx context.Context, adm *kadm.Client, names []string) (errs []string) {
	sides := []struct {
		what   string
		list   func(context.Context, ...string) (kadm.ListedOffsets, error)
		into   map[topicPartition]int64
		listed kadm.ListedOffsets
		err    error
	}{
		{what: "start offsets", list: adm.ListStartOffsets, into: r.starts},
		{what: "end offsets", list: adm.ListEndOffsets, into: r.ends},
	}
	var listing sync.WaitGroup
	for i := range sides {
		listing.Go(func() { sides[i].listed, sides[i].err = sides[i].list(ctx, names...) })
	}
	listing.Wait()
	for _, side := range sides {
		if side.err != nil {
			// A shard error still returns what the other brokers answered.
			errs = append(errs, fmt.Sprintf("%s: %v", side.what, side.err))
		}
		side.listed.Each(func(o kadm.ListedOffset) {
			tp := topicPartition{o.Topic, o.Partition}
			if o.Err != nil {
				r.offsetErrs[tp] = o.Err.Error()
				return
			}
			side.into[tp] = o.Offset
		})
	}
	return errs
}

// readGroups reads the consumer groups, their members and committed
// offsets, and returns what failed.
func (r *clusterRead) readGroups(ctx context.Context, adm *kadm.Client) (errs []string) {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		errs = append(errs, fmt.Sprintf("list groups: %v", err))
		if len(listed) == 0 {
			return errs
		}
	}
	names := listed.Groups()
	if len(names) == 0 {
		return errs
	}
	described, err := adm.DescribeGroups(ctx, names...)
	if err != nil {
		errs = append(errs, fmt.Sprintf("describe groups: %v", err))
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
	return errs
}
