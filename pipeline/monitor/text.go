package monitor

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
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
	writeInputs(tw, s.Inputs)
	writeQuotas(tw, s.Quotas)
	return tw.Flush()
}

// writeQuotas writes the quotas table; nothing when no broker measured a
// quota'd client. Entities are client-chosen names, escaped as sources are.
func writeQuotas(w io.Writer, quotas []Quota) {
	if len(quotas) == 0 {
		return
	}
	fmt.Fprintln(w, "\nQUOTA ENTITY\tKIND\tUSAGE/LIMIT\tUSED\tTHROTTLE\tSOURCE\t")
	for _, q := range quotas {
		used := "-"
		if q.Limit > 0 {
			used = strconv.FormatFloat(100*q.Usage/q.Limit, 'f', 0, 64) + "%"
		}
		fmt.Fprintf(w, "%s\t%s\t%s / %s\t%s\t%s\t%s\t\n", dash(printable(q.Entity())), printable(q.Kind),
			quotaAmount(q.Kind, q.Usage), quotaAmount(q.Kind, q.Limit), used, throttleRate(q.Throttle), dash(printable(q.Source)))
	}
}

// quotaAmount writes an amount of a quota in its unit.
func quotaAmount(kind string, v float64) string {
	switch kind {
	case "producer_byte_rate", "consumer_byte_rate":
		return IECBytes(int64(v)) + "/s"
	case "request_percentage":
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + "/s"
}

// throttleRate writes throttle seconds per second as milliseconds of
// throttle per second.
func throttleRate(v float64) string {
	return strconv.FormatFloat(1000*v, 'f', 0, 64) + " ms/s"
}

// writeInputs writes the inputs table; nothing when no input published.
// A source may come from whoever posts samples to a followed sample topic,
// so it is escaped as WriteMetricsText escapes it.
func writeInputs(w io.Writer, inputs []Input) {
	if len(inputs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nINPUT\tSOURCE\tRATE\tTOTAL\tERRORS\tERRORS TOTAL\t")
	for _, in := range inputs {
		r, e := fmt.Sprintf("%.1f %s", in.Rate, in.Unit), fmt.Sprintf("%.1f %s", in.ErrorRate, in.ErrorUnit)
		if in.Stale {
			r, e = "stale", "stale"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%.0f\t%s\t%.0f\t\n", in.Name, dash(printable(in.Source)), r, in.Total, e, in.Errors)
	}
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

// WriteMetricsText writes the latest value of each series in list as the
// table `millrace top --metrics` shows: metric, labels, source, kind, value
// and the age of the value at now. Names, labels and sources come from
// whoever posted the metric, so anything unprintable in them is escaped:
// a name cannot move the cursor or recolour the terminal.
func WriteMetricsText(w io.Writer, list SeriesList, match string, now time.Time) error {
	what := "all series"
	if match != "" {
		what = "series matching " + printable(match)
	}
	fmt.Fprintf(w, "millrace top --metrics  %s  %s: %d of %d kept", now.Local().Format(time.TimeOnly), what, list.Matched, list.Total)
	if list.Dropped > 0 {
		fmt.Fprintf(w, "  (%d samples of new series dropped at the limit of %d)", list.Dropped, list.Limit)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nMETRIC\tLABELS\tSOURCE\tKIND\tVALUE\tAGE\t")
	if len(list.Series) == 0 {
		fmt.Fprintln(tw, "(no series yet)\t\t\t\t\t\t")
	}
	for _, s := range list.Series {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", printable(s.Name), dash(LabelText(s.Labels)), dash(printable(s.Source)),
			dash(printable(s.Kind)), strconv.FormatFloat(s.Last.V, 'g', 6, 64), age(now.Sub(s.Last.T)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list.Series) < list.Matched {
		_, err := fmt.Fprintf(w, "(%d more; narrow with --match or raise --limit)\n", list.Matched-len(list.Series))
		return err
	}
	return nil
}

// age writes how old a value is in whole seconds, minutes or hours.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(max(int(d.Seconds()), 0)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	}
	return strconv.Itoa(int(d.Hours())) + "h"
}

// printable returns s, or s quoted with Go escapes when it holds anything
// a terminal would not print as is (control codes, invalid UTF-8).
func printable(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.QuoteToGraphic(s)
	}
	return s
}
