package lake

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas"
	"millrace/schemas/otel"
)

// Records of several rows (doc.go, "Records of several rows"): an OTLP
// record holds many log records, spans or data points, and the otel-*
// schemas have a row for each. The worker decodes the record once
// (schemas/otel), builds each row to find its bucket, its identity
// partition value and whether its id repeats one remembered, and hands
// the lander the record with its rows (coreRecord.rows). The lander
// decides them together, so every cut falls between records, and the
// actions it returns name the row they are about (action.row); the worker
// builds that row again into p.row before running them (current.at).
// What a record costs while it lands is bounded by its size: its pdata,
// and per row 16 bytes of index (schemas/otel) and about 64 of decisions
// here; the rows themselves are built one at a time. schemas/otel refuses
// records over otel.MaxRecordBytes (2 MiB), which bounds a crafted record
// of empty items at about 200 MiB.

// recordRows is what the worker holds of a record of several rows while
// its actions run.
type recordRows struct {
	rows     *otel.Rows       // the decoded record
	identity []*identityValue // by row, with identity partitioning; nil otherwise
	noID     []bool           // by row: landed without an id dedup recognises
	filled   int              // the row p.row holds
}

// at makes p.row the row action a is about, and sets cur's per-row
// fields, when cur is a record of several rows. The caller holds
// w.landing.
func (cur *current) at(p *partitionState, a action) {
	if cur == nil || cur.rows == nil || (a.kind != actOpen && a.kind != actAppend && a.kind != actDrop) {
		return
	}
	m := cur.rows
	if m.filled != a.row {
		m.rows.Fill(a.row, p.row)
		m.filled = a.row
	}
	cur.noID = m.noID[a.row]
	if m.identity != nil {
		cur.identity = m.identity[a.row]
	}
}

// processRows classifies a record of an OTLP schema, rec and cur being
// what processRecord made of it, hands it to the lander and runs what the
// lander decides. A record that does not decode is one dead letter; one
// that decodes lands all its rows (repeats dropped one by one), or none
// when it holds none. The caller holds w.landing.
func (w *Worker) processRows(ctx context.Context, p *partitionState, r *kgo.Record, cur *current, rec coreRecord) error {
	if p.otel == nil {
		p.otel, _ = otel.New(w.schema) // an OTLP schema: checked by the caller
	}
	defer p.otel.Release()
	if err := p.otel.Decode(r.Value); err != nil {
		cur.reason = err.Error()
		rec.kind = recordDeadLetter
		rec.size = int64(len(r.Value)+len(cur.reason)) + deadLetterRowOverhead
		return w.runActions(ctx, w.core.record(p.tp, rec), cur)
	}
	n := p.otel.Len()
	m := &p.multi
	noID, identity := reuse(m.noID, n), m.identity
	if w.identity != "" {
		identity = reuse(identity, n)
	}
	*m = recordRows{rows: p.otel, noID: noID, identity: identity, filled: n - 1}
	rows := reuse(p.coreRows, n)[:0] // never nil: nil is a record of one row
	for i := range n {
		p.otel.Fill(i, p.row)
		row := coreRow{bucket: w.bucketOf(p.row, r.Timestamp)}
		if p.dedup != nil {
			kind, id := rowID(p.otel, p.row)
			row.repeat = p.dedup.decide(kind, id)
			m.noID[i] = !row.repeat && kind == idNone
		}
		if w.identity != "" && !row.repeat {
			m.identity[i] = w.identityOf(p.row)
			row.value = m.identity[i].key
		}
		rows = append(rows, row)
	}
	p.coreRows = rows
	rec.rows = rows
	cur.rows = m
	err := w.runActions(ctx, w.core.record(p.tp, rec), cur)
	if cap(p.coreRows) > maxKeptRows {
		// A huge record's buffers are not kept for the next.
		p.coreRows, m.noID, m.identity = nil, nil, nil
	}
	m.rows = nil
	return err
}

// maxKeptRows is how many rows' decisions a partition keeps room for
// between records.
const maxKeptRows = 1 << 14

// reuse returns s resized to n elements, zeroed, reusing its array when
// it is large enough.
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// rowID is the id dedup decides a filled row of rs by: a log record's
// event_id (a UUID from agents/otlp), a span's or a data point's key
// (otel.Rows.Key: hashed, 16 bytes, decided like a UUID).
func rowID(rs *otel.Rows, row *schemas.Row) (idKind, [16]byte) {
	if key, ok := rs.Key(row); ok {
		return idUUID, key
	}
	// A log record's event_id; a span without IDs has none.
	return parseEventID(string(row.StringBytes("event_id")))
}

// replayRows decides the rows of r as processRows does, without landing
// anything: the dedup rebuild's reading of a record of several rows
// (rebuild.go).
func replayRows(d *deduper, rs *otel.Rows, row *schemas.Row, r *kgo.Record) {
	defer rs.Release()
	if len(r.Value) == 0 || rs.Decode(r.Value) != nil {
		return // dead-lettered: no rows, no ids
	}
	for i := range rs.Len() {
		rs.Fill(i, row)
		d.decide(rowID(rs, row))
	}
}
