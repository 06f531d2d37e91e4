package lakeread

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// RowWriter prints rows as Scan passes them.
type RowWriter interface {
	// Write prints (or buffers) one row; values follow the writer's columns.
	Write(values []any) error
	// Flush prints whatever is buffered.
	Flush() error
}

// NewJSONWriter prints each row as one JSON object, its members in column
// order: the format for jq and for other programs. Timestamps are RFC 3339
// strings, maps are objects, NULL is null, and a float that JSON cannot spell
// is the string "NaN", "+Inf" or "-Inf", as the metric schema accepts it.
func NewJSONWriter(w io.Writer, columns []string) RowWriter {
	names := make([][]byte, len(columns))
	for i, c := range columns {
		names[i], _ = json.Marshal(c) // a string always marshals
	}
	return &jsonWriter{w: w, names: names}
}

type jsonWriter struct {
	w     io.Writer
	names [][]byte
	line  bytes.Buffer
}

func (j *jsonWriter) Write(values []any) error {
	j.line.Reset()
	j.line.WriteByte('{')
	for i, name := range j.names {
		if i > 0 {
			j.line.WriteByte(',')
		}
		j.line.Write(name)
		j.line.WriteByte(':')
		j.line.Write(jsonValue(values[i]))
	}
	j.line.WriteString("}\n")
	_, err := j.w.Write(j.line.Bytes())
	return err
}

func (j *jsonWriter) Flush() error { return nil }

// jsonValue is the JSON text of a value as valueOf returns it.
func jsonValue(v any) []byte {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		v = floatText(f)
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Only values valueOf does not make can fail; show them as text.
		b, _ = json.Marshal(Text(v))
	}
	return b
}

// Text is a value as a table cell shows it: NULL for nil, RFC 3339 for a
// time, JSON for a map, and control characters (the newlines of a
// multiline log record) escaped, so that a row stays on one line.
func Text(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return escapeControl(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return floatText(v)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return escapeControl(string(jsonValue(v)))
}

func floatText(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

var controlEscaper = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`)

func escapeControl(s string) string {
	if strings.ContainsAny(s, "\n\r\t") {
		return controlEscaper.Replace(s)
	}
	return s
}

// MaxCellWidth is where a table cell is cut (with "…"); the JSON output
// keeps whole values.
const MaxCellWidth = 48

// tableBlock is how many rows a table buffers to size its columns: the
// widths come from the header and the rows seen so far, so memory stays
// bounded on a long `cat`, and a later, wider value widens the columns from
// its block on.
const tableBlock = 256

// NewTableWriter prints rows as a table with a header line and columns
// aligned by padding with spaces, numbers to the right.
func NewTableWriter(w io.Writer, columns []string) RowWriter {
	t := &tableWriter{w: w, widths: make([]int, len(columns)), right: make([]bool, len(columns))}
	header := make([]string, len(columns))
	for i, c := range columns {
		header[i] = cut(c)
		t.widths[i] = utf8.RuneCountInString(header[i])
	}
	t.rows = append(t.rows, header)
	return t
}

type tableWriter struct {
	w      io.Writer
	widths []int
	right  []bool // right-aligned: the column's first value was a number
	known  []bool // the column's alignment is settled
	rows   [][]string
}

func (t *tableWriter) Write(values []any) error {
	if t.known == nil {
		t.known = make([]bool, len(values))
	}
	row := make([]string, len(values))
	for i, v := range values {
		if v != nil && !t.known[i] {
			t.known[i] = true
			switch v.(type) {
			case int64, float64:
				t.right[i] = true
			}
		}
		row[i] = cut(Text(v))
		if n := utf8.RuneCountInString(row[i]); n > t.widths[i] {
			t.widths[i] = n
		}
	}
	t.rows = append(t.rows, row)
	if len(t.rows) >= tableBlock {
		return t.Flush()
	}
	return nil
}

func (t *tableWriter) Flush() error {
	var b strings.Builder
	for _, row := range t.rows {
		for i, cell := range row {
			pad := t.widths[i] - utf8.RuneCountInString(cell)
			if i > 0 {
				b.WriteString("  ")
			}
			if t.right[i] {
				b.WriteString(strings.Repeat(" ", pad))
				b.WriteString(cell)
				continue
			}
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", pad))
			}
		}
		b.WriteByte('\n')
	}
	t.rows = t.rows[:0]
	_, err := io.WriteString(t.w, b.String())
	return err
}

// cut shortens a cell to MaxCellWidth characters.
func cut(s string) string {
	if utf8.RuneCountInString(s) <= MaxCellWidth {
		return s
	}
	r := []rune(s)
	return string(r[:MaxCellWidth-1]) + "…"
}
