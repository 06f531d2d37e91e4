package lakeread

import (
	"context"
	"sort"

	"millrace/store"
)

// Group is one value of a column and how many selected rows hold it.
type Group struct {
	// Value is the column's value, nil for NULL (as Scan gives it).
	Value any
	Count int64
}

// Count counts the rows the query selects by the value of column by,
// most frequent first (ties in the order of the values' JSON text). The
// query's Columns and Limit are ignored: every selected row is counted.
// Memory grows with the number of distinct values, not with the rows.
func Count(ctx context.Context, st store.Store, q Query, by string) ([]Group, error) {
	q.Columns, q.Limit = []string{by}, 0
	s, err := Open(ctx, st, q)
	if err != nil {
		return nil, err
	}
	groups := map[string]*Group{}
	err = s.Scan(ctx, func(values []any) error {
		// The JSON text tells a NULL from the string "null" and 1 from "1".
		key := string(jsonValue(values[0]))
		g := groups[key]
		if g == nil {
			g = &Group{Value: values[0]}
			groups[key] = g
		}
		g.Count++
		return nil
	})
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := groups[keys[i]], groups[keys[j]]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return keys[i] < keys[j]
	})
	out := make([]Group, len(keys))
	for i, k := range keys {
		out[i] = *groups[k]
	}
	return out, nil
}
