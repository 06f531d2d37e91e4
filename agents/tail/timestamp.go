package tail

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unsafe"
)

// Layouts of Timestamp.Layout that are not Go layouts.
const (
	LayoutRFC3339 = "rfc3339" // RFC 3339 with or without fraction; without a zone, in Timezone
	LayoutUnix    = "unix"    // seconds since the epoch, optionally with a fraction
	LayoutUnixMs  = "unix_ms" // milliseconds since the epoch
)

// Defaults for Timestamp.
const (
	DefaultTimestampLayout   = LayoutRFC3339
	DefaultTimestampTimezone = "UTC"
)

// Timestamp takes a line's "ts" from its text instead of the time the
// tailer read it, so a line lands (and is audited) in the hour it was
// written, also when it is read late: a backlog, a tailer that was down.
// Only the event's "ts" changes; the record timestamp stays the read time,
// because the broker's message.timestamp.before/after.max.ms checks and
// time retention act on it, and a mistaken timezone or an old backlog must
// not get lines rejected or deleted early.
type Timestamp struct {
	// Pattern is a Go regular expression with exactly one capture group,
	// the timestamp's text. Empty (the default) turns parsing off: every
	// line's ts is its read time. Anchor it (^) where the timestamp starts
	// the line: an anchored pattern is only tried at the line's start, an
	// unanchored one is searched for along the whole line. For a multiline
	// event it is matched against the event, whose first line comes first.
	Pattern string `yaml:"pattern"`
	// Layout reads the captured text: "rfc3339" (default), "unix"
	// (seconds, fraction allowed), "unix_ms", or a Go time layout such as
	// "2006-01-02 15:04:05.000" or "Jan _2 15:04:05". A Go layout must
	// give at least the month, day and hour; without a year, the year is
	// the read time's (the previous one if that puts the line more than a
	// day ahead of the read time, as at New Year).
	Layout string `yaml:"layout"`
	// Timezone (IANA name, e.g. "Europe/Paris", or "Local") is the zone of
	// timestamps that carry none. Default "UTC".
	Timezone string `yaml:"timezone"`
}

// withDefaults fills Layout and Timezone when a pattern is set.
func (ts Timestamp) withDefaults() Timestamp {
	if ts.Pattern == "" {
		return ts
	}
	if ts.Layout == "" {
		ts.Layout = DefaultTimestampLayout
	}
	if ts.Timezone == "" {
		ts.Timezone = DefaultTimestampTimezone
	}
	return ts
}

// validate reports what is wrong with ts; nil when parsing is off.
func (ts Timestamp) validate() error {
	if ts.Pattern == "" {
		if ts.Layout != "" || ts.Timezone != "" {
			return errors.New("tail: timestamp: layout and timezone are set but pattern is empty, so no timestamp would be parsed")
		}
		return nil
	}
	_, err := newTimestampParser(ts)
	return err
}

// timestampParser is a compiled Timestamp. Only the loop goroutine uses it.
type timestampParser struct {
	re     *regexp.Regexp
	layout string // a Go layout, or one of the Layout* names
	loc    *time.Location
	noYear bool // a Go layout without a year: the read time's year is used

	// Consecutive lines often carry the same timestamp text (one second
	// of a busy log): the last text and its time are kept to skip parsing.
	lastText []byte
	last     time.Time
}

// newTimestampParser compiles ts (defaults applied), or says why it cannot.
func newTimestampParser(ts Timestamp) (*timestampParser, error) {
	re, err := regexp.Compile(ts.Pattern)
	if err != nil {
		return nil, fmt.Errorf("tail: timestamp.pattern: %w", err)
	}
	if n := re.NumSubexp(); n != 1 {
		return nil, fmt.Errorf("tail: timestamp.pattern %q has %d capture groups; it needs exactly one, around the timestamp (write other groups as (?:...))", ts.Pattern, n)
	}
	loc, err := time.LoadLocation(ts.Timezone)
	if err != nil {
		return nil, fmt.Errorf("tail: timestamp.timezone: %w", err)
	}
	p := &timestampParser{re: re, layout: ts.Layout, loc: loc}
	switch ts.Layout {
	case LayoutRFC3339, LayoutUnix, LayoutUnixMs:
		return p, nil
	}
	// A Go layout must read back what it writes, down to the hour, or the
	// line would land in some other hour than the one it names. The probe
	// differs from Go's reference time in every field, so a layout with no
	// elements formats to itself, and an afternoon hour tells a 12-hour
	// clock without AM/PM.
	ref := time.Date(2031, time.November, 23, 19, 47, 58, 0, loc)
	text := ref.Format(ts.Layout)
	if text == ts.Layout {
		return nil, fmt.Errorf("tail: timestamp.layout %q has no Go time elements; use rfc3339, unix, unix_ms or a layout written with Go's reference time, e.g. \"2006-01-02 15:04:05\"", ts.Layout)
	}
	got, err := time.ParseInLocation(ts.Layout, text, loc)
	if err != nil {
		return nil, fmt.Errorf("tail: timestamp.layout %q cannot read the times it writes: %w", ts.Layout, err)
	}
	if got.Month() != ref.Month() || got.Day() != ref.Day() || got.Hour() != ref.Hour() {
		return nil, fmt.Errorf("tail: timestamp.layout %q must give the month, day and hour (a 12-hour clock needs PM too): of 2031-11-23 19:47:58 it keeps %q", ts.Layout, text)
	}
	p.noYear = got.Year() != ref.Year()
	return p, nil
}

// parse returns the time the line names and true, or false when the
// pattern does not match or its capture does not parse. now is the read
// time, which supplies a missing year.
func (p *timestampParser) parse(line []byte, now time.Time) (time.Time, bool) {
	m := p.re.FindSubmatchIndex(line)
	if m == nil || m[2] < 0 {
		return time.Time{}, false
	}
	text := line[m[2]:m[3]]
	if p.lastText != nil && bytes.Equal(text, p.lastText) {
		return p.last, true
	}
	t, ok := p.parseText(unsafe.String(unsafe.SliceData(text), len(text)), now)
	if !ok {
		return time.Time{}, false
	}
	p.lastText = append(p.lastText[:0], text...)
	p.last = t
	return t, true
}

// parseText reads s, a view of the line's bytes (not kept).
func (p *timestampParser) parseText(s string, now time.Time) (time.Time, bool) {
	switch p.layout {
	case LayoutRFC3339:
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, true
		}
		// Without a zone: the configured one.
		t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, p.loc)
		return t, err == nil
	case LayoutUnixMs:
		ms, err := strconv.ParseInt(s, 10, 64)
		return time.UnixMilli(ms), err == nil
	case LayoutUnix:
		return parseUnix(s)
	}
	t, err := time.ParseInLocation(p.layout, s, p.loc)
	if err != nil {
		return time.Time{}, false
	}
	if p.noYear {
		local := now.In(p.loc)
		t = t.AddDate(local.Year()-t.Year(), 0, 0)
		if t.Sub(now) > 24*time.Hour {
			t = t.AddDate(-1, 0, 0)
		}
	}
	return t, true
}

// parseUnix reads seconds since the epoch with an optional fraction of up
// to nanoseconds ("1764645845" or "1764645845.123").
func parseUnix(s string) (time.Time, bool) {
	whole, frac, dot := s, "", false
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			whole, frac, dot = s[:i], s[i+1:], true
			break
		}
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec < 0 || dot && (frac == "" || len(frac) > 9) {
		return time.Time{}, false
	}
	var nsec int64
	for i := 0; i < 9; i++ {
		nsec *= 10
		if i < len(frac) {
			if frac[i] < '0' || frac[i] > '9' {
				return time.Time{}, false
			}
			nsec += int64(frac[i] - '0')
		}
	}
	return time.Unix(sec, nsec), true
}
