package cli

import (
	"context"
	"fmt"
	"sort"
	"text/tabwriter"
)

func init() {
	register("cluster status", "cluster status", clusterStatus)
}

// clusterStatus prints the live brokers, the controller, the leader count of
// each broker, and the partitions that are under-replicated (ISR smaller
// than the replicas) or offline (no leader), from Metadata.
func clusterStatus(ctx context.Context, e env, args []string) error {
	f := newFlags("cluster status")
	brokers := f.brokers()
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	adm, done, err := newAdmin(ctx, *brokers)
	if err != nil {
		return err
	}
	defer done()
	md, err := adm.Metadata(ctx)
	if err != nil {
		return err
	}
	leaders := map[int32]int{}
	var under, offline []string
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
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
	fmt.Fprintf(e.stdout, "cluster %s  controller %d  brokers %d\n", md.Cluster, md.Controller, len(md.Brokers))
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BROKER\tADDRESS\tRACK\tLEADERS")
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
			fmt.Fprintf(w, "%d\t%s:%d\t%s\t%d\n", b.NodeID, b.Host, b.Port, rack, leaders[b.NodeID])
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
	return nil
}
