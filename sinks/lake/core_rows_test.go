package lake

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recRows hands the lander record offset of p holding several rows (an
// OTLP record), spelt "h0 h1 r …": a row in bucket hour +N, or a repeat;
// ts is its record time in seconds after t0.
func (tr *coreTrace) recRows(p int32, offset int64, spec string, ts float64) {
	tp := topicPartition{"otlp_logs", p}
	name := fmt.Sprintf("record %d@%d rows[%s] t=%gs", p, offset, spec, ts)
	if !tr.l.fresh(tp, offset) {
		tr.b.WriteString(fmt.Sprintf("%-40s -> re-delivered, not decided\n", name))
		return
	}
	rows := []coreRow{}
	for _, f := range strings.Fields(spec) {
		if f == "r" {
			rows = append(rows, coreRow{repeat: true})
			continue
		}
		var h int
		fmt.Sscanf(f, "h%d", &h)
		rows = append(rows, coreRow{bucket: t0.Add(time.Duration(h) * time.Hour)})
	}
	tr.line(name, tr.l.record(tp, coreRecord{offset: offset, timestamp: at(ts), rows: rows}))
}

// TestGoldenRows: a record of several rows (an OTLP record: one row per
// log record, span or data point) is decided as one: its rows land in
// one window, in files of their buckets named by the record's offset; a
// rows cut comes after the record even when it overshoots RollRows; an
// age or open-file cut comes before it, counting every file the record
// needs (landing the record's own window, else the other partitions'); a record with more buckets than MaxOpenFiles still opens them
// all; repeats among its rows are dropped one by one; a record of no rows,
// or of repeats only, advances the window without a row, and its
// re-delivery is not decided again.
func TestGoldenRows(t *testing.T) {
	limits := coreLimits
	limits.maxOpenFiles = 3
	tr := &coreTrace{l: newLander(limits)}
	tr.l.delivered(topicPartition{"otlp_logs", 0}, at(0))
	tr.recRows(0, 0, "h0 h0 h1", 0)
	tr.recRows(0, 0, "h0 h0 h1", 0)
	tr.recRows(0, 1, "h0 r h0", 1)
	tr.recRows(0, 2, "", 2)
	tr.recRows(0, 3, "r r", 3)
	tr.recRows(0, 4, "h1 h2 h3", 4)
	tr.recRows(0, 5, "h0 h1 h2 h3", 5)
	tr.recRows(0, 6, "h0", 6)
	tr.recRows(1, 0, "h5", 7)
	tr.recRows(0, 7, "h6 h7 h8", 90)
	tr.line("shutdown", tr.l.shutdown())
	checkGolden(t, "rows", tr.b.String())
}
