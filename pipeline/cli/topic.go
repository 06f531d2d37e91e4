package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/pipeline/monitor"
)

func init() {
	addCommand("topic", topicCreateCommand)
	addCommand("topic", topicListCommand)
	addCommand("topic", topicDescribeCommand)
	addCommand("topic", topicDeleteCommand)
	addCommand("topic", topicAlterCommand)
}

func topicCreateCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create NAME --partitions N [--replication-factor R] [--config k=v]...",
		Short: "create a topic",
		Args:  exactArgs(1),
	}
	f := cmd.Flags()
	partitions := f.IntP("partitions", "p", -1, "number of partitions (-1: the broker's num.partitions)")
	replication := f.IntP("replication-factor", "r", -1, "replicas per partition (-1: the broker's default)")
	configs := keyValues{}
	f.VarP(configs, "config", "c", "topic config `key=value` (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		adm, done, err := e.newAdmin(ctx)
		if err != nil {
			return err
		}
		defer done()
		cfg := make(map[string]*string, len(configs))
		for k, v := range configs {
			cfg[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*replication), cfg, args[0])
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", args[0], err)
		}
		fmt.Fprintf(e.stdout, "created topic %s (%d partitions, replication factor %d)\n", resp.Topic, resp.NumPartitions, resp.ReplicationFactor)
		return nil
	}
	return cmd
}

func topicListCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "list the topics with their partitions and replication factor",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			adm, done, err := e.newAdmin(ctx)
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
		},
	}
}

func topicDescribeCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "show a topic's configs and, per partition, leader, replicas, ISR, offsets and size (local and remote when tiered)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return topicDescribe(cmd.Context(), e, args[0])
		},
	}
}

func topicDescribe(ctx context.Context, e *env, name string) error {
	cl, err := e.newPingedClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, name)
	if err != nil {
		return err
	}
	t, ok := topics[name]
	if !ok || t.Err != nil {
		return fmt.Errorf("describe %s: %w", name, errOr(t.Err, "no such topic"))
	}
	// The offsets and sizes come from each partition's leader, the configs
	// from any broker; all are read at once, and a partition whose leader
	// does not answer in time (hung, or down since the listing) shows "?"
	// and "-" rather than holding up the rest.
	leaders := map[int32]int32{}
	for _, p := range t.Partitions {
		leaders[p.Partition] = p.Leader
	}
	offsetsCtx, cancel := context.WithTimeout(ctx, monitor.ReadTimeout)
	defer cancel()
	var (
		reads                     sync.WaitGroup
		starts, ends, localStarts kadm.ListedOffsets
		dirs                      map[int32]partitionDir
		configs                   kadm.ResourceConfigs
		configsErr                error
	)
	reads.Go(func() { starts, _ = adm.ListStartOffsets(offsetsCtx, name) })
	reads.Go(func() { ends, _ = adm.ListEndOffsets(offsetsCtx, name) })
	reads.Go(func() { localStarts, _ = adm.ListLocalLogStartOffsets(offsetsCtx, name) })
	reads.Go(func() { dirs = readLeaderDirs(ctx, cl, name, leaders) })
	reads.Go(func() { configs, configsErr = adm.DescribeTopicConfigs(ctx, name) })
	reads.Wait()
	if configsErr != nil {
		return configsErr
	}
	fmt.Fprintf(e.stdout, "topic %s  id %s  partitions %d  replication %d\n", t.Topic, t.ID, len(t.Partitions), t.Partitions.NumReplicas())
	tiered := false
	if rc, err := configs.On(name, nil); err == nil {
		var set []string
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				set = append(set, c.Key+"="+c.MaybeValue())
			}
			tiered = tiered || (c.Key == "remote.storage.enable" && c.MaybeValue() == "true")
		}
		sort.Strings(set)
		if len(set) > 0 {
			fmt.Fprintf(e.stdout, "configs %v\n", set)
		}
	}
	for _, d := range dirs {
		tiered = tiered || d.tiered
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if !tiered {
		fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tEARLIEST\tLATEST\tSIZE")
	} else {
		// The local part (from its start on the leader's disk, and its
		// size) and the remote part (its start, its end, the offset below
		// which everything is remote, and its size); EARLIEST is the
		// partition's, the smaller of the two starts.
		fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tEARLIEST\tLATEST\tLOCAL START\tLOCAL SIZE\tREMOTE START\tREMOTE END\tREMOTE SIZE")
	}
	for _, p := range t.Partitions.Sorted() {
		d, known := dirs[p.Partition]
		size := "-"
		if known {
			size = monitor.IECBytes(d.size)
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%s\t%s", p.Partition, p.Leader, p.LeaderEpoch,
			ints(p.Replicas), ints(p.ISR), offsetString(starts, t.Topic, p.Partition), offsetString(ends, t.Topic, p.Partition))
		switch {
		case !tiered:
			fmt.Fprintf(w, "\t%s\n", size)
		case d.tiered:
			fmt.Fprintf(w, "\t%s\t%s\t%d\t%d\t%s\n", offsetString(localStarts, t.Topic, p.Partition), size,
				d.remote.LogStartOffset, d.remote.EndOffset, monitor.IECBytes(d.remote.Size))
		default: // nothing uploaded yet, or the leader did not answer
			fmt.Fprintf(w, "\t%s\t%s\t-\t-\t-\n", offsetString(localStarts, t.Topic, p.Partition), size)
		}
	}
	return w.Flush()
}

func topicDeleteCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "delete a topic",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			adm, done, err := e.newAdmin(ctx)
			if err != nil {
				return err
			}
			defer done()
			resp, err := adm.DeleteTopic(ctx, args[0])
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				return fmt.Errorf("delete %s: %w", args[0], err)
			}
			fmt.Fprintf(e.stdout, "deleted topic %s\n", args[0])
			return nil
		},
	}
}

func topicAlterCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alter NAME --config k=v [--config k=v]...",
		Short: "set or remove a topic's config overrides",
		Args:  exactArgs(1),
	}
	configs := keyValues{}
	cmd.Flags().VarP(configs, "config", "c", "topic config `key=value` (repeatable; empty value removes the override)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if len(configs) == 0 {
			return usageError("nothing to alter: give --config k=v")
		}
		adm, done, err := e.newAdmin(ctx)
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
		resps, err := adm.AlterTopicConfigs(ctx, alters, args[0])
		if err != nil {
			return err
		}
		for _, r := range resps {
			if r.Err != nil {
				return fmt.Errorf("alter %s: %w (%s)", r.Name, r.Err, r.ErrMessage)
			}
		}
		fmt.Fprintf(e.stdout, "altered topic %s\n", args[0])
		return nil
	}
	return cmd
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
