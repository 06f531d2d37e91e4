package cli

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

func init() {
	register("group list", "group list", groupList)
	register("group describe", "group describe GROUP", groupDescribe)
	register("group reset", "group reset GROUP --topic T --to-earliest|--to-latest|--to-offset N", groupReset)
}

func groupList(ctx context.Context, e env, args []string) error {
	_, adm, done, err := adminCommand(ctx, "group list", args, 0)
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
func groupDescribe(ctx context.Context, e env, args []string) error {
	pos, adm, done, err := adminCommand(ctx, "group describe", args, 1)
	if err != nil {
		return err
	}
	defer done()
	described, err := adm.DescribeGroups(ctx, pos[0])
	if err != nil {
		return err
	}
	g, ok := described[pos[0]]
	if !ok || g.Err != nil {
		return fmt.Errorf("describe %s: %w", pos[0], errOr(g.Err, "no such group"))
	}
	committed, err := adm.FetchOffsets(ctx, pos[0])
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
func groupReset(ctx context.Context, e env, args []string) error {
	f := newFlags("group reset")
	brokers := f.brokers()
	topic := f.String("topic", "", "topic whose offsets to reset (required)")
	toEarliest := f.Bool("to-earliest", false, "reset to each partition's earliest offset")
	toLatest := f.Bool("to-latest", false, "reset to each partition's end")
	toOffset := f.Int64("to-offset", -1, "reset every partition to this offset")
	pos, err := f.parse(args, 1)
	if err != nil {
		return err
	}
	chosen := 0
	for _, b := range []bool{*toEarliest, *toLatest, *toOffset >= 0} {
		if b {
			chosen++
		}
	}
	if *topic == "" || chosen != 1 {
		return usageError("give --topic and exactly one of --to-earliest, --to-latest, --to-offset")
	}
	adm, done, err := newAdmin(ctx, *brokers)
	if err != nil {
		return err
	}
	defer done()
	var listed kadm.ListedOffsets
	if *toLatest {
		listed, err = adm.ListEndOffsets(ctx, *topic)
	} else {
		listed, err = adm.ListStartOffsets(ctx, *topic)
	}
	if err != nil {
		return err
	}
	if err := listed.Error(); err != nil {
		return fmt.Errorf("list offsets of %s: %w", *topic, err)
	}
	offsets := make(kadm.Offsets)
	listed.Each(func(o kadm.ListedOffset) {
		at := o.Offset
		if *toOffset >= 0 {
			at = *toOffset
		}
		offsets.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: at, LeaderEpoch: -1})
	})
	resp, err := adm.CommitOffsets(ctx, pos[0], offsets)
	if err != nil {
		return err
	}
	if err := resp.Error(); err != nil {
		return fmt.Errorf("reset %s: %w (a group with active members cannot be reset)", pos[0], err)
	}
	fmt.Fprintf(e.stdout, "reset group %s on %s (%d partitions)\n", pos[0], *topic, len(listed.Offsets()))
	return nil
}
