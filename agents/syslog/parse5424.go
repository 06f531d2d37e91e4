package syslog

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// RFC 5424 §6: HEADER = PRI VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP
// PROCID SP MSGID, then SP STRUCTURED-DATA, then optionally SP MSG. Every
// header field may be the NILVALUE "-".

// Header field limits, RFC 5424 §6.
const (
	maxHostname = 255
	maxAppName  = 48
	maxProcID   = 128
	maxMsgID    = 32
	maxSDName   = 32 // SD-NAME, §6.3.2 and §6.3.3
)

// utf8BOM starts an MSG that is UTF-8 (RFC 5424 §6.4).
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// parse5424 fills r from msg, which starts at the VERSION. It returns why
// the message is malformed, or "".
func parse5424(r *Record, msg []byte) string {
	if msg[0] != '1' {
		return "unsupported RFC 5424 version " + string(msg[0])
	}
	p := msg[2:]
	var field []byte
	var ok bool
	if field, p, ok = token(p); !ok {
		return "the RFC 5424 header ends before the timestamp"
	}
	if !isNil(field) {
		t, err := parseTimestamp5424(field)
		if err != "" {
			return err
		}
		r.Timestamp = &t
	}
	names := [...]struct {
		name string
		max  int
		dst  *string
	}{{"hostname", maxHostname, &r.Host}, {"app-name", maxAppName, &r.App}, {"procid", maxProcID, &r.ProcID}, {"msgid", maxMsgID, &r.MsgID}}
	for _, f := range names {
		if field, p, ok = token(p); !ok {
			return "the RFC 5424 header ends before the " + f.name
		}
		if len(field) > f.max || !printASCII(field) {
			return "the RFC 5424 " + f.name + " is longer than " + strconv.Itoa(f.max) + " characters or not printable ASCII"
		}
		if !isNil(field) {
			*f.dst = string(field)
		}
	}
	if len(p) == 0 {
		return "the RFC 5424 message ends before its structured data"
	}
	if p[0] == '-' {
		p = p[1:]
	} else {
		sd, rest, err := parseSD(p)
		if err != "" {
			return err
		}
		r.StructuredData, p = sd, rest
	}
	if len(p) > 0 {
		if p[0] != ' ' {
			return "the RFC 5424 structured data is not followed by a space"
		}
		p = bytes.TrimPrefix(p[1:], utf8BOM)
	}
	r.Message = string(p)
	return ""
}

// token splits p at its first space; ok is false when there is none, or
// the token is empty.
func token(p []byte) (field, rest []byte, ok bool) {
	i := bytes.IndexByte(p, ' ')
	if i <= 0 {
		return nil, p, false
	}
	return p[:i], p[i+1:], true
}

func isNil(field []byte) bool { return len(field) == 1 && field[0] == '-' }

// printASCII reports whether b is PRINTUSASCII (%d33-126), RFC 5424 §6.
func printASCII(b []byte) bool {
	for _, c := range b {
		if c < 33 || c > 126 {
			return false
		}
	}
	return true
}

// parseTimestamp5424 reads an RFC 5424 §6.2.3 TIMESTAMP: RFC 3339 with "T"
// and "Z" in upper case, at most 6 fraction digits, no leap second.
func parseTimestamp5424(field []byte) (time.Time, string) {
	s := string(field)
	if dot := strings.IndexByte(s, '.'); dot >= 0 {
		end := dot + 1
		for end < len(s) && s[end] >= '0' && s[end] <= '9' {
			end++
		}
		if end-dot-1 == 0 || end-dot-1 > 6 {
			return time.Time{}, "the RFC 5424 timestamp " + quote(s) + " has no fraction digits or more than 6"
		}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || len(s) < 20 || s[10] != 'T' {
		return time.Time{}, "the RFC 5424 timestamp " + quote(s) + " is not RFC 3339 (2006-01-02T15:04:05.000000Z07:00)"
	}
	return t, ""
}

// parseSD reads one or more SD-ELEMENTs (RFC 5424 §6.3): "[" SD-ID
// *(SP PARAM-NAME "=" DQUOTE PARAM-VALUE DQUOTE) "]". In a PARAM-VALUE '"',
// '\' and ']' are escaped by '\'; a '\' before any other character is kept
// (§6.3.3).
func parseSD(p []byte) (map[string]map[string]string, []byte, string) {
	sd := make(map[string]map[string]string)
	for len(p) > 0 && p[0] == '[' {
		p = p[1:]
		id, rest := sdName(p)
		if id == "" {
			return nil, nil, "an RFC 5424 SD-ID is empty, longer than 32 characters or not printable ASCII"
		}
		p = rest
		params := sd[id]
		if params == nil {
			params = make(map[string]string)
			sd[id] = params
		}
		for {
			if len(p) == 0 {
				return nil, nil, "the RFC 5424 structured data element " + quote(id) + " is not closed by ']'"
			}
			if p[0] == ']' {
				p = p[1:]
				break
			}
			if p[0] != ' ' {
				return nil, nil, "the RFC 5424 structured data element " + quote(id) + " has a parameter not preceded by a space"
			}
			name, rest := sdName(p[1:])
			if name == "" || len(rest) < 2 || rest[0] != '=' || rest[1] != '"' {
				return nil, nil, "a parameter of RFC 5424 structured data element " + quote(id) + " is not NAME=\"value\""
			}
			value, rest, ok := sdValue(rest[2:])
			if !ok {
				return nil, nil, "the value of parameter " + quote(name) + " in RFC 5424 structured data element " + quote(id) + " is not closed by '\"'"
			}
			params[name] = value
			p = rest
		}
	}
	if len(sd) == 0 {
		return nil, nil, "the RFC 5424 structured data is neither '-' nor '[…]'"
	}
	return sd, p, ""
}

// sdName reads an SD-NAME: 1 to 32 PRINTUSASCII except '=', SP, ']', '"'.
func sdName(p []byte) (string, []byte) {
	i := 0
	for i < len(p) && i <= maxSDName && p[i] > 32 && p[i] < 127 && p[i] != '=' && p[i] != ']' && p[i] != '"' {
		i++
	}
	if i == 0 || i > maxSDName {
		return "", p
	}
	return string(p[:i]), p[i:]
}

// sdValue reads a PARAM-VALUE up to its closing '"', removing escapes.
func sdValue(p []byte) (string, []byte, bool) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '"':
			return b.String(), p[i+1:], true
		case '\\':
			if i+1 < len(p) && (p[i+1] == '"' || p[i+1] == '\\' || p[i+1] == ']') {
				i++
				b.WriteByte(p[i])
				continue
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return "", nil, false
}

// quote shows a piece of a message in an error, cut to a readable length.
func quote(s string) string {
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "\uFFFD") + "\""
}
