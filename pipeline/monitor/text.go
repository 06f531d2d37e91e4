package monitor

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes a snapshot as the compact tables `millrace top` shows:
// a header line, then brokers, topics, groups and components. It writes no
// terminal control codes; the caller clears the screen if it wants to.
func WriteText(w io.Writer, s Snapshot) error {
	rates := s.IntervalSeconds > 0
	fmt.Fprintf(w, "millrace top  %s  brokers %d  controller %s  topics %d  under-replicated %d  offline %d\n",
		s.Time.Local().Format(time.TimeOnly), len(s.Brokers), nodeID(s.Controller), len(s.Topics), s.UnderReplicated, s.Offline)
	for _, e := range s.Errors {
		fmt.Fprintf(w, "! %s\n", e)
	}
	for _, p := range s.Problems {
		fmt.Fprintf(w, "! %s: %s\n", p.Source, p.Message)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nBROKER\tADDRESS\tRACK\tDATA\tFREE\t")
	for _, b := range s.Brokers {
		id := strconv.Itoa(int(b.ID))
		if b.ID == s.Controller {
			id += "*" // the controller, as the header says
		}
		data := "-"
		if b.Disk != nil {
			data = IECBytes(b.Disk.LogBytes)
		}
		fmt.Fprintf(tw, "%s\t%s:%d\t%s\t%s\t%s\t\n", id, b.Host, b.Port, dash(b.Rack), data, b.Disk.Free())
	}

	fmt.Fprintln(tw, "\nTOPIC\tPARTITIONS\tRF\tRECORDS\tPRODUCE/S\tUNDER-REPL\tOFFLINE\t")
	for _, t := range s.Topics {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t\n", t.Name, len(t.Partitions), t.ReplicationFactor, t.Records,
			rate(t.ProduceRate, rates), t.UnderReplicated, t.Offline)
	}

	fmt.Fprintln(tw, "\nGROUP\tSTATE\tMEMBERS\tTOPIC\tLAG\tCONSUME/S\t")
	for _, g := range s.Groups {
		if len(g.Topics) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d\t-\t0\t%s\t\n", g.Name, dash(g.State), g.Members, rate(0, rates))
		}
		for _, gt := range g.Topics {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t\n", g.Name, dash(g.State), g.Members, gt.Topic, gt.Lag, rate(gt.ConsumeRate, rates))
		}
	}

	fmt.Fprintln(tw, "\nCOMPONENT\tKIND\tSOURCE\tRATE\tTOTAL\t")
	if len(s.Components) == 0 {
		fmt.Fprintf(tw, "(no samples on %s yet)\t\t\t\t\t\n", s.MetricsTopic)
	}
	for _, c := range s.Components {
		r := fmt.Sprintf("%.1f %s", c.Rate, c.Unit)
		if c.Stale {
			r = "stale"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t\n", c.Name, c.Kind, c.Source, r, c.Total)
	}
	return tw.Flush()
}

func rate(v float64, known bool) string {
	if !known {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func nodeID(id int32) string {
	if id < 0 {
		return "-"
	}
	return strconv.Itoa(int(id))
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// IECBytes writes n bytes in binary units with one decimal (0B, 512B,
// 6.1KiB, 1.2GiB), as `millrace top` and the CLI's disk columns show them.
func IECBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i:i+1] + "iB"
}
