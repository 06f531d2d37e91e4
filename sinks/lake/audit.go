package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/audit"
	"millrace/schemas"
)

// auditKey is one source's hour, the hour as Unix seconds (formatted only
// when a count is written out).
type auditKey struct {
	source string
	hour   int64
}

// auditCounts are one key's counts.
type auditCounts struct {
	landed, deduplicated, deadLettered, noID int64
}

func (c *auditCounts) add(o auditCounts) {
	c.landed += o.landed
	c.deduplicated += o.deduplicated
	c.deadLettered += o.deadLettered
	c.noID += o.noID
}

// auditPublisher publishes a sink's audit records to the audit topic and
// reads them back; the kgo implementation is below, tests leave it nil.
type auditPublisher interface {
	publish(rec *audit.SinkRecord)
	// flush waits until everything published is acknowledged.
	flush(ctx context.Context) error
	// load reads every record of the audit topic.
	load(ctx context.Context) ([]audit.Entry, error)
}

// auditInstance names a partition of a group in audit records.
func (w *Worker) auditInstance(tp topicPartition) string {
	return w.cfg.Group + "/" + tp.topic + "/" + strconv.Itoa(int(tp.partition))
}

// rowSource is the audit source key of row: audit.SourceOf, made from the
// row's bytes. Rows of one source come in runs, so the key of the previous
// row is kept with the bytes it was made from (the host and path of a log
// line, a click url's authority, a syslog message's host and app, a
// sample's source) and reused while they
// repeat: compared in place, a row costs no allocation.
func (w *Worker) rowSource(p *partitionState, row *schemas.Row) string {
	switch w.schema.Name {
	case SchemaRegistry:
		// No agent counts a registry-typed topic: one source, none.
		return audit.NoSource
	case "log":
		host, source := row.StringBytes("host"), row.StringBytes("source")
		if p.lastKey != "" && bytes.Equal(host, p.lastHost) && bytes.Equal(source, p.lastFrom) {
			return p.lastKey
		}
		p.lastHost, p.lastFrom = append(p.lastHost[:0], host...), append(p.lastFrom[:0], source...)
		p.lastKey = audit.LogSource(string(host), string(source))
	case "click":
		authority, ok := audit.ClickAuthority(row.StringBytes("url"))
		if !ok {
			return audit.NoSource
		}
		if p.lastKey != "" && bytes.Equal(authority, p.lastFrom) {
			return p.lastKey
		}
		p.lastFrom = append(p.lastFrom[:0], authority...)
		p.lastKey = audit.AuthoritySource(string(authority))
	case "syslog":
		host, app := row.StringBytes("host"), row.StringBytes("app")
		if p.lastKey != "" && bytes.Equal(host, p.lastHost) && bytes.Equal(app, p.lastFrom) {
			return p.lastKey
		}
		p.lastHost, p.lastFrom = append(p.lastHost[:0], host...), append(p.lastFrom[:0], app...)
		p.lastKey = audit.SyslogSource(string(host), string(app))
	default:
		field := "source" // a metric sample's
		if schemas.IsOTLP(w.schema) {
			field = "service_name" // as agents/otlp counts log records
		}
		source := row.StringBytes(field)
		if p.lastKey != "" && bytes.Equal(source, p.lastFrom) {
			return p.lastKey
		}
		p.lastFrom = append(p.lastFrom[:0], source...)
		p.lastKey = audit.MetricSource(string(source))
	}
	return p.lastKey
}

// countRow counts a row landed in f; hour is its audit hour.
// The caller holds w.landing.
func (w *Worker) countRow(p *partitionState, win *window, f *outFile, recordTime time.Time) {
	hour := f.bucket
	if w.layout.Day {
		hour = w.eventTime(p.row, recordTime).Truncate(time.Hour)
	}
	k := auditKey{w.rowSource(p, p.row), hour.Unix()}
	if f.sources == nil {
		f.sources = map[auditKey]int64{}
	}
	f.sources[k]++
	win.countsFor(k).landed++
}

// countDeadLetter counts a record sent to the dead-letter topic under
// the source and hour its fields name, read leniently because the record
// did not fit the schema: the fields the source key uses, and the
// bucketing time field (RFC 3339 or epoch milliseconds), else the record
// timestamp.
// The caller holds w.landing.
func (w *Worker) countDeadLetter(win *window, r *kgo.Record) {
	var ev map[string]any
	_ = json.Unmarshal(r.Value, &ev) // not JSON: no fields, source "-"
	source := audit.SourceOf(w.schema.Name, func(name string) string { s, _ := ev[name].(string); return s })
	field := w.cfg.TimestampField
	if field == "" {
		field = w.schema.TimeField
	}
	t := r.Timestamp
	switch v := ev[field].(type) {
	case string:
		if parsed, err := time.Parse(time.RFC3339Nano, v); err == nil {
			t = parsed
		}
	case float64:
		t = time.UnixMilli(int64(v))
	}
	win.countsFor(auditKey{source, t.UTC().Truncate(time.Hour).Unix()}).deadLettered++
}

// countsFor returns the window's counts of k.
func (win *window) countsFor(k auditKey) *auditCounts {
	if win.audit == nil {
		win.audit = map[auditKey]*auditCounts{}
	}
	c := win.audit[k]
	if c == nil {
		c = &auditCounts{}
		win.audit[k] = c
	}
	return c
}

// fileRowCounts is the audit.MetaRows footer value of f.
func fileRowCounts(f *outFile) string {
	c := audit.RowCounts{}
	for k, n := range f.sources {
		c.Add(audit.Hour(time.Unix(k.hour, 0)), k.source, n)
	}
	return audit.EncodeRowCounts(c)
}

// publishAudit publishes the cumulative counts of every key the
// window touched, as of the window's end, and waits for their
// acknowledgement; endWindow calls it before the commit. A crash
// before the commit republishes the same numbers: the next owner starts
// from the counts as of the committed offset (auditBase) and counts
// the same records again.
// The caller holds w.landing.
func (w *Worker) publishAudit(ctx context.Context, p *partitionState, win *window) error {
	if w.audit == nil {
		return nil
	}
	// Dedup's counts (dedup.go) join the window's.
	for k, v := range win.dedup {
		h, err := audit.ParseHour(k.hour)
		if err != nil {
			continue // made by audit.Hour: cannot happen
		}
		c := win.countsFor(auditKey{k.source, h.Unix()})
		c.deduplicated += v[countDeduplicated]
		c.noID += v[countNoID]
	}
	if len(win.audit) == 0 {
		return nil
	}
	if err := w.auditBase(ctx, p, win.start); err != nil {
		return err
	}
	now := w.now().UTC()
	instance := w.auditInstance(p.tp)
	for k, c := range win.audit {
		total := p.auditTotals[k]
		total.add(*c)
		w.audit.publish(&audit.SinkRecord{Offset: win.next, Record: audit.Record{
			Role: audit.RoleSink, Instance: instance, Topic: p.tp.topic, Source: k.source,
			Hour: audit.Hour(time.Unix(k.hour, 0)), Landed: total.landed, Deduplicated: total.deduplicated,
			DeadLettered: total.deadLettered, NoID: total.noID, UpdatedAt: now}})
	}
	if err := w.audit.flush(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("lake: audit records of %s/%d: %w", p.tp.topic, p.tp.partition, err)
		}
		// The producer retries what the broker may yet take, so this is a
		// refusal (authorization, a record too large): landing goes on,
		// never stalls on the audit, and the hours read as not reconciled
		// rather than the lake falling behind until retention loses data.
		w.metrics.auditFailures.WithLabelValues(p.tp.topic).Inc()
		w.logger.Error("the broker refused the window's audit records; the window is landed and its counts are missing from the audit",
			"topic", p.tp.topic, "partition", p.tp.partition, "audit_topic", w.cfg.AuditTopic, "err", err)
	}
	return nil
}

// applyAudit adds a committed window's counts to the partition's
// totals.
// The caller holds w.landing.
func (w *Worker) applyAudit(p *partitionState, win *window) {
	if p.auditTotals == nil {
		return
	}
	for k, c := range win.audit {
		total := p.auditTotals[k]
		total.add(*c)
		p.auditTotals[k] = total
	}
}

// auditBase sets p's totals, once per assignment, to the counts as
// of start, the committed offset its first window starts at: per key, the
// published record with the largest offset not past start. Every window
// that counted a key published it before its commit, so the records up to
// the committed offset are all in the audit topic; records past it come
// from a window that was never committed and are ignored. One read serves
// every partition of the worker still without totals.
// The caller holds w.landing.
func (w *Worker) auditBase(ctx context.Context, p *partitionState, start int64) error {
	if p.auditTotals != nil {
		return nil
	}
	if p.auditHistory == nil {
		lctx, cancel := context.WithTimeout(ctx, auditLoadTimeout)
		entries, err := w.audit.load(lctx)
		cancel()
		if err != nil {
			return fmt.Errorf("lake: reading the audit counts of %s/%d: %w", p.tp.topic, p.tp.partition, err)
		}
		byInstance := map[string]*partitionState{}
		for _, q := range w.sortedPartitionsLocked() {
			if q.auditTotals == nil {
				q.auditHistory = []audit.Entry{}
				byInstance[w.auditInstance(q.tp)] = q
			}
		}
		for _, e := range entries {
			if q := byInstance[e.Instance]; q != nil && e.Role == audit.RoleSink && e.Topic == q.tp.topic {
				q.auditHistory = append(q.auditHistory, e)
			}
		}
	}
	type best struct {
		offset int64
		counts auditCounts
	}
	base := map[auditKey]best{}
	for _, e := range p.auditHistory {
		h, err := audit.ParseHour(e.Hour)
		if err != nil || e.SinkOffset > start {
			continue
		}
		k := auditKey{e.Source, h.Unix()}
		if b, ok := base[k]; ok && e.SinkOffset < b.offset {
			continue
		}
		base[k] = best{e.SinkOffset, auditCounts{e.Landed, e.Deduplicated, e.DeadLettered, e.NoID}}
	}
	p.auditTotals = make(map[auditKey]auditCounts, len(base))
	for k, b := range base {
		p.auditTotals[k] = b.counts
	}
	p.auditHistory = nil
	return nil
}

// announce publishes the worker's audit.Run: the topics it lands and the
// lake it lands them in. A lost announcement is logged; the next worker
// start makes it again, and until then the audit reports the topics as
// not landed rather than judging them against the wrong lake.
func (w *Worker) announce(cl *kgo.Client) {
	now := time.Now().UTC()
	r := audit.Run{Role: audit.RoleSink, Instance: w.cfg.Group, ID: audit.NewRunID(now), Topics: w.cfg.Topics,
		Lake: w.cfg.Lake, StartedAt: now, SeenAt: now}
	value, _ := r.Marshal() // strings and times: cannot fail
	cl.Produce(context.Background(), &kgo.Record{Topic: w.cfg.AuditTopic, Key: []byte(r.Key()), Value: value},
		func(_ *kgo.Record, err error) {
			if err != nil {
				w.logger.Warn("could not announce the sink on the audit topic", "topic", w.cfg.AuditTopic, "err", err)
			}
		})
}

// auditLoadTimeout bounds reading the audit topic back.
const auditLoadTimeout = time.Minute

// kgoAudit publishes with the worker's client and reads back with a client
// of its own.
type kgoAudit struct {
	client   *kgo.Client
	topic    string
	brokers  []string
	security []kgo.Opt // the worker's TLS and SASL options

	mu  sync.Mutex // guards the following
	err error      // first failed produce since the last flush
}

func (a *kgoAudit) publish(rec *audit.SinkRecord) {
	value, _ := rec.Marshal() // plain strings and numbers: cannot fail
	a.client.Produce(context.Background(), &kgo.Record{Topic: a.topic, Key: []byte(rec.Key()), Value: value},
		func(_ *kgo.Record, err error) {
			if err != nil {
				a.mu.Lock()
				if a.err == nil {
					a.err = err
				}
				a.mu.Unlock()
			}
		})
}

func (a *kgoAudit) flush(ctx context.Context) error {
	if err := a.client.Flush(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	err := a.err
	a.err = nil
	return err
}

func (a *kgoAudit) load(ctx context.Context) ([]audit.Entry, error) {
	cl, err := kgo.NewClient(append(slices.Clip(a.security), kgo.SeedBrokers(a.brokers...), kgo.ClientID("millrace-sink-audit"))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	l, err := audit.Read(ctx, cl, a.topic)
	if err != nil {
		return nil, err
	}
	return l.Entries, nil
}

// ensureTopic creates a one-partition topic with the cluster's default
// replication factor unless it exists. A failure is only logged: the
// broker may create topics on first use.
func (w *Worker) ensureTopic(ctx context.Context, cl *kgo.Client, name string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		w.logger.Warn("could not create a topic", "topic", name, "err", err)
	}
}
