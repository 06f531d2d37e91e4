// Package audit counts events where they enter millrace and where they land,
// as data on the topic _millrace.audit: agents publish how many events of
// each source and hour the broker acknowledged, sinks how many they landed,
// dropped as repeats or dead-lettered, and a reconciler reads both.
//
// Each record carries cumulative absolute counts and is keyed by
// (role, instance, topic, source, hour); for one key the latest record wins.
// A publisher that crashes and replays therefore republishes the same or
// higher numbers and never counts anything twice.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Topic is the default audit topic.
const Topic = "_millrace.audit"

// Roles of the publishers of audit records.
const (
	RoleTail   = "tail"   // the log tailer (distinct counts)
	RoleBeacon = "beacon" // the beacon's click events (not distinct: retries count again)
	RoleIntake = "intake" // metric samples posted to the beacon (not distinct)
	RoleSink   = "sink"   // a sink group's partition worker
	RoleSyslog = "syslog" // the syslog receiver (not distinct: its counts live in memory, per run)
)

// NoSource is the source key of an event that has none (a click without a
// url, a metric sample without a source).
const NoSource = "-"

// OtherSource is the source key an agent counts events under when it holds
// audit.max_keys counts or a client opens new sources too fast (see
// Counter.AddFrom); the reconciler judges it with the topic's hour as a
// whole.
const OtherSource = "(other)"

// HourLayout formats the UTC hour of an event: "2026-12-02T03". The sink
// buckets files by the same hour (dt=2026-12-02/hr=03).
const HourLayout = "2006-01-02T15"

// Hour is the audit hour of an event time: its UTC hour in HourLayout.
func Hour(t time.Time) string { return t.UTC().Format(HourLayout) }

// ParseHour parses an hour written by Hour.
func ParseHour(s string) (time.Time, error) {
	t, err := time.Parse(HourLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("audit: hour %q is not YYYY-MM-DDTHH: %w", s, err)
	}
	return t, nil
}

// MaxSourceBytes bounds a source key: it names a line of every audit
// report, a key in the agents' tables and part of every audit record's key
// and value, and it comes from clients (a click's page host, a sample's
// source), so a 1 MB host must not make a record the broker refuses. A
// longer key is cut (see BoundSource); both sides of the audit cut alike.
const MaxSourceBytes = 200

// BoundSource returns s, or when s is longer than MaxSourceBytes its first
// bytes (whole UTF-8 characters), "...#" and 16 hex digits of its SHA-256,
// so that a cut key says it was cut and two long keys stay apart.
func BoundSource(s string) string {
	if len(s) <= MaxSourceBytes {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	cut := MaxSourceBytes - len("...#") - 16
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "...#" + hex.EncodeToString(sum[:8])
}

// SourceOf is the source key of an event of the named schema ("log",
// "click", "syslog", "metric") whose string fields field returns ("" when
// absent): the one rule the agents, the sink's rows and its dead letters share.
func SourceOf(schema string, field func(name string) string) string {
	switch schema {
	case "log":
		return LogSource(field("host"), field("source"))
	case "click":
		return ClickSource(field("url"))
	case "syslog":
		return SyslogSource(field("host"), field("app"))
	default:
		return MetricSource(field("source"))
	}
}

// LogSource is the source key of a log line: "<host>:<source path>", from
// the event's host and source fields (BoundSource), or NoSource when it
// names no source path.
func LogSource(host, source string) string {
	if source == "" {
		return NoSource
	}
	return BoundSource(host + ":" + source)
}

// ClickSource is the source key of a click: the lower-case host of the
// event's url without its port, or NoSource when the url is empty, has no
// "scheme://host" part or its host is not made of host characters. Both
// sides of the audit compute it from the url the event carries. It depends
// only on the url's authority (ClickAuthority), so a caller may keep the
// key of the last authority it saw instead of computing it per event.
func ClickSource(rawURL string) string {
	authority, ok := clickAuthority(rawURL)
	if !ok {
		return NoSource
	}
	return AuthoritySource(authority)
}

// ClickAuthority returns the authority of an absolute url held in b (what
// follows "scheme://" up to the path, query or fragment), or false when it
// has none; ClickSource is AuthoritySource of it.
func ClickAuthority(b []byte) ([]byte, bool) { return clickAuthority(b) }

// clickAuthority is ClickAuthority for either form of text, so that the
// sink can look at a row's bytes without copying them.
func clickAuthority[T string | []byte](u T) (T, bool) {
	for i := 0; i+2 < len(u); i++ {
		c := u[i]
		if c == ':' && u[i+1] == '/' && u[i+2] == '/' {
			if i == 0 {
				return u[:0], false // no scheme
			}
			rest := u[i+3:]
			end := len(rest)
			for j := 0; j < len(rest); j++ {
				if rest[j] == '/' || rest[j] == '?' || rest[j] == '#' {
					end = j
					break
				}
			}
			return rest[:end], true
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return u[:0], false // not a scheme
		}
	}
	return u[:0], false
}

// AuthoritySource is the source key of a url authority: its host without
// user information, port or IPv6 brackets, lower-cased; NoSource when that
// is empty or holds anything but letters, digits, '.', '-', '_' (and ':'
// inside brackets).
func AuthoritySource(authority string) string {
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	host, ipv6 := authority, false
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return NoSource
		}
		host, ipv6 = host[1:end], true
	} else if colon := strings.IndexByte(host, ':'); colon >= 0 {
		host = host[:colon]
	}
	if host == "" {
		return NoSource
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || ipv6 && c == ':') {
			return NoSource
		}
	}
	return BoundSource(strings.ToLower(host))
}

// MetricSource is the source key of a metric sample: its source field
// (BoundSource), or NoSource when it has none.
func MetricSource(source string) string {
	if source == "" {
		return NoSource
	}
	return BoundSource(source)
}

// SyslogSource is the source key of a syslog message: "<host>/<app>" from
// the record's host and app fields (BoundSource), or NoSource when it has
// neither (a malformed message keeps only its raw text).
func SyslogSource(host, app string) string {
	if host == "" && app == "" {
		return NoSource
	}
	return BoundSource(host + "/" + app)
}

// Record is one audit record: the cumulative counts of one publisher for one
// (topic, source, hour). Agents fill Accepted and Distinct; sinks fill
// Landed, Deduplicated, DeadLettered and NoID.
type Record struct {
	Role     string `json:"role"`
	Instance string `json:"instance"`
	// Run is the process run of a publisher whose counts live only in
	// memory (beacon, intake): each run counts from zero under its own key,
	// so the runs' totals add up (see Run). Empty for the tailer, whose
	// counts survive restarts with its checkpoint, and for sinks.
	Run    string `json:"run,omitempty"`
	Topic  string `json:"topic"`
	Source string `json:"source"`
	Hour   string `json:"hour"`

	// Accepted is the number of events the broker acknowledged (agents).
	Accepted int64 `json:"accepted"`
	// Distinct says Accepted counts every event once even across crashes
	// and re-sends (the tailer keeps its counts with its checkpoint); when
	// false, each repeat of an event was counted (browser retries).
	Distinct bool `json:"distinct"`

	Landed       int64 `json:"landed,omitempty"`        // sink: rows written to the lake
	Deduplicated int64 `json:"deduplicated,omitempty"`  // sink: rows dropped as repeats
	DeadLettered int64 `json:"dead_lettered,omitempty"` // sink: records sent to the dead-letter topic
	NoID         int64 `json:"no_id,omitempty"`         // sink: rows without an event id

	UpdatedAt time.Time `json:"updated_at"`
}

// Key is the record's key: "<role>/<instance>/<topic>/<source>/<hour>",
// with "<instance>#<run>" for a record of a run. The source may itself
// contain slashes (file paths), so the key identifies a record but is not
// parsed back: read the value (ParseRecord).
func (r *Record) Key() string {
	instance := r.Instance
	if r.Run != "" {
		instance += "#" + r.Run
	}
	return Key(r.Role, instance, r.Topic, r.Source, r.Hour)
}

// Key builds a record key from its parts.
func Key(role, instance, topic, source, hour string) string {
	return role + "/" + instance + "/" + topic + "/" + source + "/" + hour
}

// Marshal encodes the record's value as JSON.
func (r *Record) Marshal() ([]byte, error) { return json.Marshal(r) }

// ParseRecord decodes and checks a record's value: every identifying field
// must be present, the hour well-formed and the counts non-negative.
func ParseRecord(value []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return Record{}, fmt.Errorf("audit: record is not JSON: %w", err)
	}
	if err := r.Validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// Validate reports what is wrong with a record, if anything.
func (r *Record) Validate() error {
	switch r.Role {
	case RoleTail, RoleBeacon, RoleIntake, RoleSink, RoleSyslog:
	default:
		return fmt.Errorf("audit: unknown role %q", r.Role)
	}
	if r.Instance == "" || r.Topic == "" || r.Source == "" {
		return errors.New("audit: record lacks an instance, topic or source")
	}
	if _, err := ParseHour(r.Hour); err != nil {
		return err
	}
	if r.Accepted < 0 || r.Landed < 0 || r.Deduplicated < 0 || r.DeadLettered < 0 || r.NoID < 0 {
		return errors.New("audit: record has a negative count")
	}
	return nil
}
