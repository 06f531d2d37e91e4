package audit

import (
	"encoding/json"
	"fmt"
)

// MetaRows is the Parquet footer key under which the sink writes how many of
// a file's rows came from each source and hour, as JSON
// {"<hour>":{"<source>":rows}} (json.Marshal sorts the keys, so a rewrite of
// the file after a crash has the same footer). The reconciler counts what
// the lake holds from these footers alone, so a file deleted by hand lowers
// the count.
const MetaRows = "millrace.audit.rows"

// RowCounts counts rows per hour and source: counts[hour][source].
type RowCounts map[string]map[string]int64

// Add counts n rows of source in hour.
func (c RowCounts) Add(hour, source string, n int64) {
	m := c[hour]
	if m == nil {
		m = map[string]int64{}
		c[hour] = m
	}
	m[source] += n
}

// EncodeRowCounts is the MetaRows value for c.
func EncodeRowCounts(c RowCounts) string {
	b, _ := json.Marshal(c) // strings and integers: cannot fail
	return string(b)
}

// DecodeRowCounts reads a MetaRows value.
func DecodeRowCounts(s string) (RowCounts, error) {
	var c RowCounts
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return nil, fmt.Errorf("audit: %s is not {hour:{source:rows}}: %w", MetaRows, err)
	}
	for h, m := range c {
		if _, err := ParseHour(h); err != nil {
			return nil, err
		}
		for s, n := range m {
			if n < 0 {
				return nil, fmt.Errorf("audit: %s: %d rows for %s in %s", MetaRows, n, s, h)
			}
		}
	}
	return c, nil
}
