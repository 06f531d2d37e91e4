package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord/zk"
	"millrace/pipeline/monitor"
)

func init() {
	addCommand("cluster", func(e *env) *cobra.Command {
		return &cobra.Command{
			Use:   "status",
			Short: "show the brokers, the controller, leaders, disk use, under-replicated and offline partitions, partitions refusing appends, moves in progress",
			Args:  exactArgs(0),
			RunE:  func(cmd *cobra.Command, _ []string) error { return clusterStatus(cmd.Context(), e) },
		}
	})
	addCommand("cluster", clusterReassignCommand)
	addCommand("cluster", clusterElectCommand)
}

// clusterElect asks the controller for leader elections (ElectLeaders):
// the preferred replica, or with --unclean any alive replica for
// partitions whose leader is gone; every partition, or those of --topic.
// It prints the partitions that got a new leader and those that could not,
// and fails if any could not.
func clusterElectCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "elect [--unclean] [--topic T [--partition P]]",
		Short: "elect preferred leaders, or with --unclean any alive replica where the leader is gone",
		Args:  exactArgs(0),
	}
	f := cmd.Flags()
	unclean := f.Bool("unclean", false, "elect an alive replica for partitions whose leader is gone, out of sync if need be (records may be lost)")
	topic := f.StringP("topic", "t", "", "only this topic's partitions")
	partition := f.IntP("partition", "p", -1, "only this partition of --topic")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return clusterElect(cmd.Context(), e, *unclean, *topic, *partition)
	}
	return cmd
}

func clusterElect(ctx context.Context, e *env, unclean bool, topic string, partition int) error {
	if partition >= 0 && topic == "" {
		return usageError("--partition needs --topic")
	}
	adm, done, err := e.newAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	var which kadm.TopicsSet // nil: every partition
	if topic != "" {
		which = kadm.TopicsSet{}
		if partition >= 0 {
			which.Add(topic, int32(partition))
		} else {
			md, err := adm.Metadata(ctx, topic)
			if err != nil {
				return err
			}
			if err := md.Topics[topic].Err; err != nil {
				return fmt.Errorf("topic %s: %w", topic, err)
			}
			for _, p := range md.Topics[topic].Partitions {
				which.Add(topic, p.Partition)
			}
		}
	}
	how := kadm.ElectPreferredReplica
	if unclean {
		how = kadm.ElectLiveReplica
	}
	results, err := adm.ElectLeaders(ctx, how, which)
	if err != nil {
		return err
	}
	var all []kadm.ElectLeadersResult
	for _, ps := range results {
		for _, r := range ps {
			all = append(all, r)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].Topic < all[j].Topic || all[i].Topic == all[j].Topic && all[i].Partition < all[j].Partition
	})
	var elected, notNeeded, failed int
	for _, r := range all {
		switch {
		case r.Err == nil:
			elected++
			fmt.Fprintf(e.stdout, "%s/%d: new leader elected\n", r.Topic, r.Partition)
		case errors.Is(r.Err, kerr.ElectionNotNeeded):
			notNeeded++
		default:
			failed++
			fmt.Fprintf(e.stdout, "%s/%d: %v\n", r.Topic, r.Partition, r.Err)
		}
	}
	fmt.Fprintf(e.stdout, "%d elected, %d not needed, %d failed\n", elected, notNeeded, failed)
	if failed > 0 {
		return fmt.Errorf("%d partition(s) got no new leader", failed)
	}
	return nil
}

// diskColumns formats a broker's log directories for cluster status:
// replicas held, their bytes on disk, and the volume's usable and total
// bytes ("-" where the broker did not say).
func diskColumns(dirs kadm.DescribedLogDirs) string {
	d := monitor.DiskOf(dirs)
	if d == nil {
		return "-\t-\t-"
	}
	return strconv.Itoa(d.Replicas) + "\t" + monitor.IECBytes(d.LogBytes) + "\t" + d.Free()
}

// clusterReassign writes a reassignment request moving every partition of a
// topic onto the listed brokers to /admin/reassign_partitions; the
// controller carries it out. Partition p gets the list rotated by p, so the
// preferred leaders (first replicas) stay spread over the brokers. With
// --wait it returns once the request is done.
func clusterReassignCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reassign --zookeeper HOST:PORT[/chroot] --topic T --brokers 1,2,4 [--wait]",
		Short: "move every partition of a topic onto the listed brokers",
		Args:  exactArgs(0),
		// It writes the request to ZooKeeper, as kafka-reassign-partitions
		// did; its --brokers are broker IDs, not addresses.
		Annotations: noClient,
	}
	f := cmd.Flags()
	zkServers := f.String("zookeeper", "127.0.0.1:2181", "ZooKeeper servers, host:port[,host:port...][/chroot]")
	topic := f.StringP("topic", "t", "", "the topic to move")
	list := f.String("brokers", "", "target broker IDs, comma-separated; the first is the preferred leader")
	wait := f.Bool("wait", false, "wait until the reassignment is complete")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return clusterReassign(cmd.Context(), e, *zkServers, *topic, *list, *wait)
	}
	return cmd
}

func clusterReassign(ctx context.Context, e *env, zkServers, topic, list string, wait bool) error {
	if topic == "" || list == "" {
		return usageError("--topic and --brokers are required")
	}
	var target []int32
	for _, s := range strings.Split(list, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || id < 0 {
			return usageError("--brokers: %q is not a broker ID", s)
		}
		target = append(target, int32(id))
	}
	store, err := zk.Connect(zkServers, 10*time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer store.Close()
	partitions, err := cluster.TopicPartitionCount(store, topic)
	if err != nil {
		return err
	}
	moves := make([]cluster.Reassignment, 0, partitions)
	for p := int32(0); p < partitions; p++ {
		k := int(p) % len(target)
		replicas := append(slices.Clone(target[k:]), target[:k]...)
		moves = append(moves, cluster.Reassignment{Topic: topic, Partition: p, Replicas: replicas})
	}
	if err := cluster.RequestReassignment(store, moves); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "reassignment of %d partition(s) of %s to brokers %s requested\n", partitions, topic, ints(target))
	if !wait {
		return nil
	}
	for {
		pending, err := cluster.PendingReassignments(store)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			fmt.Fprintln(e.stdout, "reassignment complete")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the reassignment (%d partition(s) left): %w", len(pending), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// clusterStatus prints the live brokers, the controller, the leader count of
// each broker, the partitions that are under-replicated (ISR smaller than
// the replicas) or offline (no leader), from Metadata, and those whose log
// refuses appends on some broker after a failed write (storageRefusals).
func clusterStatus(ctx context.Context, e *env) error {
	cl, err := e.newPingedClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx)
	if err != nil {
		return err
	}
	leaders := map[int32]int{}
	var under, offline []string
	every := kadm.TopicsSet{}
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			every.Add(t.Topic, p.Partition)
			name := fmt.Sprintf("%s/%d", t.Topic, p.Partition)
			switch {
			case p.Leader < 0:
				offline = append(offline, name)
			case len(p.ISR) < len(p.Replicas):
				under = append(under, fmt.Sprintf("%s (isr %s of %s)", name, ints(p.ISR), ints(p.Replicas)))
			}
			if p.Leader >= 0 {
				leaders[p.Leader]++
			}
		}
	}
	refusing, refusingErr := storageRefusals(ctx, cl, md.Brokers.NodeIDs())
	// What each broker holds on disk. The error is not the command's: a
	// broker that did not answer in time (down since the metadata was read,
	// or hung) shows "-" in those columns.
	disks, _ := monitor.ReadLogDirs(ctx, adm, md.Brokers.NodeIDs(), nil)
	movesCtx, cancel := context.WithTimeout(ctx, monitor.ReadTimeout)
	moves, movesErr := adm.ListPartitionReassignments(movesCtx, every)
	cancel()
	fmt.Fprintf(e.stdout, "cluster %s  controller %d  brokers %d\n", md.Cluster, md.Controller, len(md.Brokers))
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BROKER\tADDRESS\tRACK\tLEADERS\tREPLICAS\tDATA\tFREE")
	ids := make([]int, 0, len(md.Brokers))
	for _, b := range md.Brokers {
		ids = append(ids, int(b.NodeID))
	}
	sort.Ints(ids)
	for _, id := range ids {
		for _, b := range md.Brokers {
			if int(b.NodeID) != id {
				continue
			}
			rack := "-"
			if b.Rack != nil {
				rack = *b.Rack
			}
			fmt.Fprintf(w, "%d\t%s:%d\t%s\t%d\t%s\n", b.NodeID, b.Host, b.Port, rack, leaders[b.NodeID], diskColumns(disks[b.NodeID]))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "under-replicated partitions: %d\n", len(under))
	for _, p := range under {
		fmt.Fprintf(e.stdout, "  %s\n", p)
	}
	fmt.Fprintf(e.stdout, "offline partitions: %d\n", len(offline))
	for _, p := range offline {
		fmt.Fprintf(e.stdout, "  %s\n", p)
	}
	if refusingErr != nil {
		fmt.Fprintf(e.stdout, "partitions refusing appends (storage error): unknown for some brokers (%v)\n", refusingErr)
	} else {
		fmt.Fprintf(e.stdout, "partitions refusing appends (storage error): %d\n", len(refusing))
	}
	for _, r := range refusing {
		fmt.Fprintf(e.stdout, "  %s (log on broker %s refuses appends after a failed write; see docs/limits.md)\n", r.name, ints(r.brokers))
	}
	if movesErr != nil {
		fmt.Fprintf(e.stdout, "reassignments in progress: unknown (%v)\n", movesErr)
		return nil
	}
	moving := moves.Sorted()
	fmt.Fprintf(e.stdout, "reassignments in progress: %d\n", len(moving))
	for _, m := range moving {
		fmt.Fprintf(e.stdout, "  %s/%d (replicas %s, adding %s, removing %s)\n", m.Topic, m.Partition,
			idsOrDash(m.Replicas), idsOrDash(m.AddingReplicas), idsOrDash(m.RemovingReplicas))
	}
	return nil
}

// refusal is a partition whose log refuses appends on some brokers.
type refusal struct {
	name    string // topic/partition
	brokers []int32
}

// storageRefusals asks every broker, all at once, which of its partition
// logs refuse appends after a failed write (a full or failing disk): each
// lists itself among a partition's offline replicas in its own Metadata
// answer, and only it knows. The error names brokers that did not answer
// within monitor.ReadTimeout.
func storageRefusals(ctx context.Context, cl *kgo.Client, brokers []int32) ([]refusal, error) {
	var (
		mu    sync.Mutex // guards found and errs
		found = map[string][]int32{}
		errs  []error
		wg    sync.WaitGroup
	)
	for _, id := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqCtx, cancel := context.WithTimeout(ctx, monitor.ReadTimeout)
			defer cancel()
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(reqCtx, cl.Broker(int(id))) // every topic
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %d: %w", id, err))
				return
			}
			for _, t := range resp.Topics {
				if t.Topic == nil {
					continue
				}
				for _, p := range t.Partitions {
					if slices.Contains(p.OfflineReplicas, id) {
						name := fmt.Sprintf("%s/%d", *t.Topic, p.Partition)
						found[name] = append(found[name], id)
					}
				}
			}
		}()
	}
	wg.Wait()
	out := make([]refusal, 0, len(found))
	for name, ids := range found {
		slices.Sort(ids)
		out = append(out, refusal{name, ids})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, errors.Join(errs...)
}

// idsOrDash lists broker IDs, or "-" for none.
func idsOrDash(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	return ints(ids)
}
