package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/pipeline/monitor"
)

func init() {
	register("topic create", "topic create NAME --partitions N [--replication-factor R] [--config k=v]...", topicCreate)
	register("topic list", "topic list", topicList)
	register("topic describe", "topic describe NAME", topicDescribe)
	register("topic delete", "topic delete NAME", topicDelete)
	register("topic alter", "topic alter NAME --config k=v [--config k=v]...", topicAlter)
}

func topicCreate(ctx context.Context, e env, args []string) error {
	f := newFlags("topic create")
	brokers := f.brokers()
	partitions := f.Int("partitions", -1, "number of partitions (-1: the broker's num.partitions)")
	replication := f.Int("replication-factor", -1, "replicas per partition (-1: the broker's default)")
	configs := keyValues{}
	f.Var(configs, "config", "topic config `key=value` (repeatable)")
	pos, err := f.parse(args, 1)
	if err != nil {
		return err
	}
	adm, done, err := newAdmin(ctx, *brokers)
	if err != nil {
		return err
	}
	defer done()
	cfg := make(map[string]*string, len(configs))
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*replication), cfg, pos[0])
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", pos[0], err)
	}
	fmt.Fprintf(e.stdout, "created topic %s (%d partitions, replication factor %d)\n", resp.Topic, resp.NumPartitions, resp.ReplicationFactor)
	return nil
}

func topicList(ctx context.Context, e env, args []string) error {
	_, adm, done, err := adminCommand(ctx, "topic list", args, 0)
	if err != nil {
		return err
	}
	defer done()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITIONS\tREPLICATION")
	for _, t := range topics.Sorted() {
		fmt.Fprintf(w, "%s\t%d\t%d\n", t.Topic, len(t.Partitions), t.Partitions.NumReplicas())
	}
	return w.Flush()
}

func topicDescribe(ctx context.Context, e env, args []string) error {
	pos, adm, done, err := adminCommand(ctx, "topic describe", args, 1)
	if err != nil {
		return err
	}
	defer done()
	topics, err := adm.ListTopics(ctx, pos[0])
	if err != nil {
		return err
	}
	t, ok := topics[pos[0]]
	if !ok || t.Err != nil {
		return fmt.Errorf("describe %s: %w", pos[0], errOr(t.Err, "no such topic"))
	}
	// The offsets and sizes come from each partition's leader, the configs
	// from any broker; all are read at once, and a partition whose leader
	// does not answer in time (hung, or down since the listing) shows "?"
	// and "-" rather than holding up the rest.
	held := kadm.TopicsSet{}
	held.Add(t.Topic, t.Partitions.Numbers()...)
	var leaders []int32
	for _, p := range t.Partitions {
		if p.Leader >= 0 {
			leaders = append(leaders, p.Leader)
		}
	}
	offsetsCtx, cancel := context.WithTimeout(ctx, monitor.ReadTimeout)
	defer cancel()
	var (
		reads        sync.WaitGroup
		starts, ends kadm.ListedOffsets
		dirs         kadm.DescribedAllLogDirs
		configs      kadm.ResourceConfigs
		configsErr   error
	)
	reads.Go(func() { starts, _ = adm.ListStartOffsets(offsetsCtx, pos[0]) })
	reads.Go(func() { ends, _ = adm.ListEndOffsets(offsetsCtx, pos[0]) })
	reads.Go(func() { dirs, _ = monitor.ReadLogDirs(ctx, adm, leaders, held) })
	reads.Go(func() { configs, configsErr = adm.DescribeTopicConfigs(ctx, pos[0]) })
	reads.Wait()
	if configsErr != nil {
		return configsErr
	}
	fmt.Fprintf(e.stdout, "topic %s  id %s  partitions %d  replication %d\n", t.Topic, t.ID, len(t.Partitions), t.Partitions.NumReplicas())
	if rc, err := configs.On(pos[0], nil); err == nil {
		var set []string
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				set = append(set, c.Key+"="+c.MaybeValue())
			}
		}
		sort.Strings(set)
		if len(set) > 0 {
			fmt.Fprintf(e.stdout, "configs %v\n", set)
		}
	}
	size := func(leader, partition int32) string {
		for _, d := range dirs[leader] {
			if p, ok := d.Topics.Lookup(t.Topic, partition); ok && d.Err == nil {
				return monitor.IECBytes(p.Size)
			}
		}
		return "-"
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tEARLIEST\tLATEST\tSIZE")
	for _, p := range t.Partitions.Sorted() {
		fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, p.LeaderEpoch,
			ints(p.Replicas), ints(p.ISR), offsetString(starts, t.Topic, p.Partition),
			offsetString(ends, t.Topic, p.Partition), size(p.Leader, p.Partition))
	}
	return w.Flush()
}

func topicDelete(ctx context.Context, e env, args []string) error {
	pos, adm, done, err := adminCommand(ctx, "topic delete", args, 1)
	if err != nil {
		return err
	}
	defer done()
	resp, err := adm.DeleteTopic(ctx, pos[0])
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", pos[0], err)
	}
	fmt.Fprintf(e.stdout, "deleted topic %s\n", pos[0])
	return nil
}

func topicAlter(ctx context.Context, e env, args []string) error {
	f := newFlags("topic alter")
	brokers := f.brokers()
	configs := keyValues{}
	f.Var(configs, "config", "topic config `key=value` (repeatable; empty value removes the override)")
	pos, err := f.parse(args, 1)
	if err != nil {
		return err
	}
	if len(configs) == 0 {
		return usageError("nothing to alter: give --config k=v")
	}
	adm, done, err := newAdmin(ctx, *brokers)
	if err != nil {
		return err
	}
	defer done()
	var alters []kadm.AlterConfig
	for k, v := range configs {
		if v == "" {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			continue
		}
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	resps, err := adm.AlterTopicConfigs(ctx, alters, pos[0])
	if err != nil {
		return err
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("alter %s: %w (%s)", r.Name, r.Err, r.ErrMessage)
		}
	}
	fmt.Fprintf(e.stdout, "altered topic %s\n", pos[0])
	return nil
}

func ints(v []int32) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(int(x))
	}
	return s
}

// offsetString is a partition's listed offset, "?" when it was not listed.
func offsetString(list kadm.ListedOffsets, topic string, partition int32) string {
	o, ok := list.Lookup(topic, partition)
	if !ok || o.Err != nil {
		return "?"
	}
	return strconv.FormatInt(o.Offset, 10)
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%s", msg)
}
