// Package syslog receives syslog messages over UDP, TCP and TLS and
// produces one JSON record per message through agents/ship.
//
// Parsing follows RFC 5424 when the PRI is followed by a version digit and a
// space ("<34>1 "), and RFC 3164 otherwise, with the deviations rsyslog,
// util-linux logger and network gear send: no hostname, an RFC 3339
// timestamp where 3164 puts "Mmm dd hh:mm:ss", a Cisco sequence number and
// "*Mar  1 00:04:34.123:" clock. A 3164 timestamp has no year and no zone:
// the year is the receiver's, the one that puts the time nearest the
// receipt, and the zone is Config.TimeZone. Nothing is dropped for being
// malformed: a message that does not parse becomes a record with its raw
// text and a parse_error.
//
// Framing on TCP and TLS follows RFC 6587 and is chosen per message by its
// first byte: a digit starts octet counting ("LEN SP MSG"), anything else a
// newline-terminated message. A message longer than max_message_bytes is
// truncated to that size, its record flagged truncated, and the rest is read
// and discarded (counted in millrace_syslog_truncated_total): the sender's
// framing is kept, and the log line is not lost. A UDP datagram is one
// message.
//
// # Record schema
//
// Each record's value is one JSON object:
//
//	event_id         string   a new UUIDv7 (a syslog sender sends no id)
//	format           string   "rfc5424", "rfc3164" or "" when the PRI is bad
//	facility         number   0-23, and facility_name ("kern", "user", … "local7"); 1 (user)
//	                          and severity 5 (notice) when the PRI is bad, as RFC 3164 §4.3.3 says
//	severity         number   0-7, and severity_name ("emerg" … "debug")
//	timestamp        string   RFC 3339 with fractions, omitted when the message has none
//	host             string   HOSTNAME, omitted when absent or "-"
//	app              string   APP-NAME or the 3164 TAG
//	procid           string   PROCID or the 3164 TAG's [PID]
//	msgid            string   MSGID (5424 only)
//	structured_data  object   SD-ID → {PARAM-NAME → value}, escapes removed; a repeated
//	                          PARAM-NAME keeps its last value
//	message          string   MSG, a leading UTF-8 BOM removed; invalid UTF-8 becomes U+FFFD;
//	                          empty when parse_error is set (the text is in raw)
//	raw              string   the whole message, only when parse_error is set
//	parse_error      string   why the message did not parse
//	truncated        bool     the message was longer than max_message_bytes
//	received_at      string   when the receiver read the message (RFC 3339)
//	sender           string   the sender's address (ip:port)
//	transport        string   "udp", "tcp" or "tls"
//
// The record's timestamp is received_at; its key is empty, so records
// spread over the topic's partitions.
//
// # Loss
//
// A UDP sender is never told of loss, so the receiver counts what it can:
// datagrams its queue could not take (millrace_syslog_dropped_total with
// reason "udp_queue_full"). Datagrams the kernel dropped before the receiver
// read them (socket buffer full) never reach it; they are counted host-wide
// in /proc/net/snmp as UdpInErrors and RcvbufErrors, which the receiver
// exports as millrace_syslog_kernel_udp_in_errors and
// millrace_syslog_kernel_udp_rcvbuf_errors where that file exists; a larger
// udp_read_buffer makes them rarer. TCP and
// TLS senders are slowed instead: a connection is read no faster than the
// producer takes its records.
package syslog

import "time"

// Record is one received message, as produced to the topic.
type Record struct {
	EventID        string                       `json:"event_id"`
	Format         string                       `json:"format"`
	Facility       int                          `json:"facility"`
	FacilityName   string                       `json:"facility_name"`
	Severity       int                          `json:"severity"`
	SeverityName   string                       `json:"severity_name"`
	Timestamp      *time.Time                   `json:"timestamp,omitempty"`
	Host           string                       `json:"host,omitempty"`
	App            string                       `json:"app,omitempty"`
	ProcID         string                       `json:"procid,omitempty"`
	MsgID          string                       `json:"msgid,omitempty"`
	StructuredData map[string]map[string]string `json:"structured_data,omitempty"`
	Message        string                       `json:"message"`
	Raw            string                       `json:"raw,omitempty"`
	ParseError     string                       `json:"parse_error,omitempty"`
	Truncated      bool                         `json:"truncated,omitempty"`
	ReceivedAt     time.Time                    `json:"received_at"`
	Sender         string                       `json:"sender"`
	Transport      string                       `json:"transport"`
}

// Formats of Record.Format.
const (
	Format5424 = "rfc5424"
	Format3164 = "rfc3164"
)

// facilityNames are RFC 5424 §6.2.1's facilities, by code; 4 and 10 are
// both "security/authorization", named as Linux's syslog.h does.
var facilityNames = [24]string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news",
	"uucp", "cron", "authpriv", "ftp", "ntp", "audit", "alert", "clock",
	"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}

// severityNames are RFC 5424 §6.2.1's severities, by code.
var severityNames = [8]string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

// setPriority fills facility and severity from a PRI value (0-191).
func (r *Record) setPriority(pri int) {
	r.Facility, r.Severity = pri/8, pri%8
	r.FacilityName, r.SeverityName = facilityNames[r.Facility], severityNames[r.Severity]
}

// fail marks r as malformed: the whole message is kept in raw.
func (r *Record) fail(raw []byte, reason string) {
	r.Raw, r.ParseError = string(raw), reason
}

// Parse reads one syslog message: RFC 5424 when a version follows the PRI,
// RFC 3164 otherwise. now and loc date a 3164 timestamp (it has neither
// year nor zone). It never fails: a malformed message gives a record with
// raw and parse_error set. Receipt fields (event_id, received_at, sender,
// transport) are left to the caller.
func Parse(msg []byte, now time.Time, loc *time.Location) Record {
	var r Record
	pri, rest, ok := parsePRI(msg)
	if !ok {
		// RFC 3164 §4.3.3: a message without a valid PRI is user.notice.
		r.setPriority(13)
		r.fail(msg, "the message does not start with a PRI (<0> to <191>)")
		return r
	}
	r.setPriority(pri)
	if len(rest) >= 2 && rest[0] >= '1' && rest[0] <= '9' && rest[1] == ' ' {
		r.Format = Format5424
		if err := parse5424(&r, rest); err != "" {
			r = Record{Format: Format5424}
			r.setPriority(pri)
			r.fail(msg, err)
		}
		return r
	}
	r.Format = Format3164
	parse3164(&r, rest, now, loc)
	return r
}

// parsePRI reads "<N>" with N of 1 to 3 digits, at most 191 (RFC 5424 §6.2.1).
func parsePRI(msg []byte) (pri int, rest []byte, ok bool) {
	if len(msg) < 3 || msg[0] != '<' {
		return 0, nil, false
	}
	i := 1
	for ; i < len(msg) && i <= 4 && msg[i] >= '0' && msg[i] <= '9'; i++ {
		pri = pri*10 + int(msg[i]-'0')
	}
	if i == 1 || i > 4 || i >= len(msg) || msg[i] != '>' || pri > 191 {
		return 0, nil, false
	}
	return pri, msg[i+1:], true
}
