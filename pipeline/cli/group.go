package cli

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() {
	addCommand("group", func(e *env) *cobra.Command {
		return &cobra.Command{
			Use:   "list",
			Short: "list the consumer groups",
			Args:  exactArgs(0),
			RunE:  func(cmd *cobra.Command, _ []string) error { return groupList(cmd.Context(), e) },
		}
	})
	addCommand("group", func(e *env) *cobra.Command {
		return &cobra.Command{
			Use:   "describe GROUP",
			Short: "show a group's members and, per partition, committed offset, end and lag",
			Args:  exactArgs(1),
			RunE:  func(cmd *cobra.Command, args []string) error { return groupDescribe(cmd.Context(), e, args[0]) },
		}
	})
	addCommand("group", groupResetCommand)
}

func groupList(ctx context.Context, e *env) error {
	adm, done, err := e.newAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tSTATE\tPROTOCOL TYPE")
	for _, g := range groups.Sorted() {
		fmt.Fprintf(w, "%s\t%s\t%s\n", g.Group, g.State, g.ProtocolType)
	}
	return w.Flush()
}

// groupDescribe prints a group's members and, per partition, the committed
// offset, the end offset and the lag.
func groupDescribe(ctx context.Context, e *env, group string) error {
	adm, done, err := e.newAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	g, ok := described[group]
	if !ok || g.Err != nil {
		return fmt.Errorf("describe %s: %w", group, errOr(g.Err, "no such group"))
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	topics := committed.Partitions()
	for _, m := range g.Members {
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				topics.Add(t.Topic, t.Partitions...)
			}
		}
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 { // with no topics kadm would list every topic
		if ends, err = adm.ListEndOffsets(ctx, topics.Topics()...); err != nil {
			return err
		}
	}
	lag := kadm.CalculateGroupLag(g, committed, ends)

	fmt.Fprintf(e.stdout, "group %s  state %s  protocol %s/%s  members %d  coordinator %d (%s)\n", g.Group, g.State, g.ProtocolType, g.Protocol,
		len(g.Members), g.Coordinator.NodeID, net.JoinHostPort(g.Coordinator.Host, strconv.Itoa(int(g.Coordinator.Port))))
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tCLIENT\tHOST\tASSIGNED")
	for _, m := range g.Members {
		assigned := ""
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for i, t := range ca.Topics {
				if i > 0 {
					assigned += " "
				}
				assigned += fmt.Sprintf("%s:%s", t.Topic, ints(t.Partitions))
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, m.ClientHost, assigned)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	w = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER")
	var total int64
	for _, l := range lag.Sorted() {
		member := "-"
		if l.Member != nil {
			member = l.Member.MemberID
		}
		if l.Err != nil {
			fmt.Fprintf(w, "%s\t%d\t?\t?\t?\t%s (%v)\n", l.Topic, l.Partition, member, l.Err)
			continue
		}
		total += l.Lag
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\n", l.Topic, l.Partition, l.Commit.At, l.End.Offset, l.Lag, member)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "total lag %d\n", total)
	return nil
}

// groupReset moves a group's committed offsets; Kafka requires the group to
// have no active members, and so does the broker.
func groupResetCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset GROUP --topic T --to-earliest|--to-latest|--to-offset N",
		Short: "move a group's committed offsets (the group must have no active members)",
		Args:  exactArgs(1),
	}
	f := cmd.Flags()
	var o groupResetOptions
	f.StringVarP(&o.topic, "topic", "t", "", "topic whose offsets to reset (required)")
	f.BoolVar(&o.toEarliest, "to-earliest", false, "reset to each partition's earliest offset")
	f.BoolVar(&o.toLatest, "to-latest", false, "reset to each partition's end")
	f.Int64Var(&o.toOffset, "to-offset", -1, "reset every partition to this offset")
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return groupReset(cmd.Context(), e, args[0], o) }
	return cmd
}

type groupResetOptions struct {
	topic                string
	toEarliest, toLatest bool
	toOffset             int64
}

func groupReset(ctx context.Context, e *env, group string, opt groupResetOptions) error {
	chosen := 0
	for _, b := range []bool{opt.toEarliest, opt.toLatest, opt.toOffset >= 0} {
		if b {
			chosen++
		}
	}
	if opt.topic == "" || chosen != 1 {
		return usageError("give --topic and exactly one of --to-earliest, --to-latest, --to-offset")
	}
	adm, done, err := e.newAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	var listed kadm.ListedOffsets
	if opt.toLatest {
		listed, err = adm.ListEndOffsets(ctx, opt.topic)
	} else {
		listed, err = adm.ListStartOffsets(ctx, opt.topic)
	}
	if err != nil {
		return err
	}
	if err := listed.Error(); err != nil {
		return fmt.Errorf("list offsets of %s: %w", opt.topic, err)
	}
	offsets := make(kadm.Offsets)
	listed.Each(func(o kadm.ListedOffset) {
		at := o.Offset
		if opt.toOffset >= 0 {
			at = opt.toOffset
		}
		offsets.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: at, LeaderEpoch: -1})
	})
	resp, err := adm.CommitOffsets(ctx, group, offsets)
	if err != nil {
		return err
	}
	if err := resp.Error(); err != nil {
		return fmt.Errorf("reset %s: %w (a group with active members cannot be reset)", group, err)
	}
	fmt.Fprintf(e.stdout, "reset group %s on %s (%d partitions)\n", group, opt.topic, len(listed.Offsets()))
	return nil
}
