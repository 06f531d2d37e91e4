package syslog

import (
	"bytes"
	"time"
)

// RFC 3164 §4.1: PRI, then HEADER = TIMESTAMP SP HOSTNAME SP, then MSG,
// whose TAG (up to the first character that is not alphanumeric,
// customarily "app[pid]: ") names the program. Senders deviate in ways the
// parser accepts (each with a case in parse3164_test.go):
//   - an RFC 3339 timestamp in TIMESTAMP's place (rsyslog's
//     RSYSLOG_ForwardFormat, syslog-ng's ISO dates);
//   - no HOSTNAME (local sockets' format sent over the network; logger
//     without --rfc3164 hostname): the word after the timestamp is the TAG
//     when it ends in ':' or holds '[';
//   - Cisco IOS: a sequence number "52: " before the timestamp, a '*' or
//     '.' before it (clock not synchronised), milliseconds, a year, a zone
//     name, and ':' after it;
//   - no timestamp at all: then, as §4.3.2 says, everything is MSG.

// months are 3164's month abbreviations.
var months = map[string]time.Month{"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6,
	"Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12}

// maxTag is the longest TAG taken as an app name; 3164 says 32, programs
// send longer.
const maxTag = 48

// parse3164 fills r from msg, which starts after the PRI. It never fails.
func parse3164(r *Record, msg []byte, now time.Time, loc *time.Location) {
	p := skipSequence(msg)
	if t, rest, ok := timestamp3164(p, now, loc); ok {
		r.Timestamp = &t
		p = rest
		if host, rest, ok := token(p); ok && !looksLikeTag(host) {
			r.Host, p = string(host), rest
		}
	} else {
		p = msg
	}
	r.App, r.ProcID, p = tag(p)
	r.Message = string(p)
}

// skipSequence removes Cisco's "NNN: " sequence number when a timestamp
// follows it.
func skipSequence(p []byte) []byte {
	i := 0
	for i < len(p) && i < 10 && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i > 0 && len(p) > i+2 && p[i] == ':' && p[i+1] == ' ' {
		return p[i+2:]
	}
	return p
}

// looksLikeTag says whether the word after a timestamp is a TAG rather
// than a HOSTNAME: "sshd[42]:", "kernel:", "%ASA-6-302013:".
func looksLikeTag(word []byte) bool {
	return word[len(word)-1] == ':' || bytes.IndexByte(word, '[') >= 0
}

// timestamp3164 reads the timestamp at the start of p and the space after
// it: "Mmm dd hh:mm:ss" (dd padded by a space or a zero), Cisco's
// variations of it, or RFC 3339.
func timestamp3164(p []byte, now time.Time, loc *time.Location) (time.Time, []byte, bool) {
	if word, rest, ok := token(p); ok && len(word) >= 19 && word[4] == '-' && word[10] == 'T' {
		if t, err := time.Parse(time.RFC3339Nano, string(word)); err == nil {
			return t, rest, true
		}
		if t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", string(word), loc); err == nil {
			return t, rest, true
		}
		return time.Time{}, nil, false
	}
	if len(p) > 0 && (p[0] == '*' || p[0] == '.') {
		p = p[1:]
	}
	if len(p) < 15 || p[3] != ' ' {
		return time.Time{}, nil, false
	}
	month, ok := months[string(p[:3])]
	if !ok {
		return time.Time{}, nil, false
	}
	day, ok := number(p[4:6], true)
	if !ok || p[6] != ' ' {
		return time.Time{}, nil, false
	}
	p = p[7:]
	year := 0
	if len(p) >= 5 && p[4] == ' ' {
		if y, ok := number(p[:4], false); ok {
			year, p = y, p[5:]
		}
	}
	if len(p) < 8 || p[2] != ':' || p[5] != ':' {
		return time.Time{}, nil, false
	}
	hour, ok1 := number(p[0:2], false)
	minute, ok2 := number(p[3:5], false)
	second, ok3 := number(p[6:8], false)
	if !ok1 || !ok2 || !ok3 || hour > 23 || minute > 59 || second > 59 {
		return time.Time{}, nil, false
	}
	p = p[8:]
	nanos := 0
	if len(p) > 1 && p[0] == '.' {
		i, scale := 1, 100_000_000
		for ; i < len(p) && i <= 9 && p[i] >= '0' && p[i] <= '9'; i++ {
			nanos += int(p[i]-'0') * scale
			scale /= 10
		}
		p = p[i:]
	}
	// Cisco: " UTC:" or ":" after the clock.
	if len(p) > 0 && p[0] == ':' {
		p = p[1:]
	} else if len(p) > 1 && p[0] == ' ' {
		if word, _, ok := token(p[1:]); ok && len(word) <= 6 && word[len(word)-1] == ':' && isUpper(word[:len(word)-1]) {
			p = p[1+len(word):]
		}
	}
	if len(p) > 0 && p[0] != ' ' {
		return time.Time{}, nil, false
	}
	if len(p) > 0 {
		p = p[1:]
	}
	t, ok := dateIn(year, month, day, hour, minute, second, nanos, now.In(loc), loc)
	return t, p, ok
}

// dateIn makes the time; when year is 0 (3164 sends none) it is the latest
// year that puts the time no more than a month after now: a December
// message read in January is last year's, a January message read on
// December 31 (a fast sender clock) next year's, and a March message read
// in December this year's. A day the month does not have (Feb 29 of
// another year) is no timestamp.
func dateIn(year int, month time.Month, day, hour, minute, second, nanos int, now time.Time, loc *time.Location) (time.Time, bool) {
	build := func(y int) (time.Time, bool) {
		t := time.Date(y, month, day, hour, minute, second, nanos, loc)
		return t, t.Month() == month && t.Day() == day
	}
	if year != 0 {
		return build(year)
	}
	latest := now.Add(maxFutureSkew)
	for _, y := range []int{now.Year() + 1, now.Year(), now.Year() - 1} {
		if t, ok := build(y); ok && !t.After(latest) {
			return t, true
		}
	}
	return time.Time{}, false
}

// maxFutureSkew is how far after its receipt a 3164 timestamp may be
// before it is taken as last year's.
const maxFutureSkew = 31 * 24 * time.Hour

// number reads decimal digits; spacePad allows a leading space (" 4").
func number(b []byte, spacePad bool) (int, bool) {
	n := 0
	for i, c := range b {
		if c == ' ' && i == 0 && spacePad {
			continue
		}
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func isUpper(b []byte) bool {
	for _, c := range b {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return len(b) > 0
}

// tag splits "app[pid]: rest" or "app: rest". Anything else has no tag
// and is all message.
func tag(p []byte) (app, procid string, rest []byte) {
	i := 0
	for i < len(p) && i <= maxTag && p[i] != ' ' && p[i] != ':' && p[i] != '[' {
		i++
	}
	if i == 0 || i > maxTag || i == len(p) {
		return "", "", p
	}
	name := p[:i]
	after := p[i:]
	if after[0] == '[' {
		end := bytes.IndexByte(after, ']')
		if end < 2 || end > maxProcID+1 {
			return "", "", p
		}
		procid = string(after[1:end])
		after = after[end+1:]
	}
	if len(after) == 0 || after[0] != ':' {
		if procid != "" && (len(after) == 0 || after[0] == ' ') {
			// "app[42] message": the colon left out.
			return string(name), procid, trimSpace1(after)
		}
		return "", "", p
	}
	return string(name), procid, trimSpace1(after[1:])
}

// trimSpace1 removes the one space that separates a TAG from its message.
func trimSpace1(p []byte) []byte {
	if len(p) > 0 && p[0] == ' ' {
		return p[1:]
	}
	return p
}
