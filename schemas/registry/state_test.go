package registry

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"millrace/schemas/format"
)

var update = flag.Bool("update", false, "rewrite the golden views in testdata/state")

// TestStateGolden applies each testdata/state/*.records (one record a line:
// key, a tab, and the value or null for a tombstone; "placeholder" for
// an offset without a record, as Log.Read gives one; # starts a comment)
// and compares the view with the .golden beside it. The cases follow the
// record rules of Confluent's KafkaStoreReaderThread: IDs are global and
// never given twice, DELETE_SUBJECT soft-deletes up to a version,
// CLEAR_SUBJECT and tombstones remove for good, and a record that does not
// parse is skipped without stopping the view.
func TestStateGolden(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob("testdata/state/*.records")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".records")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := NewState(toyParse, format.DefaultLimits, nil)
			for _, rec := range readRecords(t, in) {
				st.Apply(rec)
			}
			got := dumpState(st)
			golden := strings.TrimSuffix(in, ".records") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("view of %s:\n%s\nwant:\n%s", in, got, want)
			}
		})
	}
}

// toyParse is the Server's parse over the toy types.
func toyParse(schemaType, text string, refs map[string]string) (format.Schema, error) {
	t, ok := toyTypes()[schemaType]
	if !ok {
		return nil, fmt.Errorf("schema type %q is not served", schemaType)
	}
	return t.Parse(text, refs, format.DefaultLimits)
}

func readRecords(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "placeholder" {
			out = append(out, Record{Offset: int64(len(out))})
			continue
		}
		key, value, _ := strings.Cut(line, "\t")
		rec := Record{Key: []byte(key), Offset: int64(len(out))}
		if value != "null" {
			rec.Value = []byte(value)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpState writes the view in a stable order.
func dumpState(st *State) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "next %d, max id %d, compatibility %q, mode %q\n", st.next, st.maxID, st.compat, st.mode)
	names := make([]string, 0, len(st.subjects))
	for name := range st.subjects {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		sub := st.subjects[name]
		fmt.Fprintf(&b, "subject %s: compatibility %q, mode %q\n", name, sub.compat, sub.mode)
		for _, v := range sub.versions {
			deleted := ""
			if v.deleted {
				deleted = " (soft-deleted)"
			}
			fmt.Fprintf(&b, "  version %d: id %d%s\n", v.version, v.id, deleted)
		}
	}
	ids := make([]int, 0, len(st.schemas))
	for id := range st.schemas {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := st.schemas[id]
		fmt.Fprintf(&b, "id %d: %s, used by %d, parsed %v, refs %s, text %s\n", id, e.schemaType, st.uses[id], e.parsed != nil, mustJSON(e.refs), e.text)
	}
	var edges []string
	for to, froms := range st.referrers {
		for from := range froms {
			edges = append(edges, fmt.Sprintf("%s/%d referenced by %s/%d", to.subject, to.version, from.subject, from.version))
		}
	}
	sort.Strings(edges)
	for _, e := range edges {
		fmt.Fprintln(&b, e)
	}
	return b.String()
}

// FuzzApply: no record, however damaged, panics the view.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}`), []byte(`{"subject":"s","version":1,"id":1,"schema":"{\"fields\":[]}"}`), false)
	f.Add([]byte(`{"keytype":"DELETE_SUBJECT","subject":"s"}`), []byte(`{"subject":"s","version":9}`), false)
	f.Add([]byte(`{"keytype":"CONFIG","subject":null}`), []byte(nil), true)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		st := NewState(toyParse, format.DefaultLimits, nil)
		if tombstone {
			value = nil
		}
		for i := range 3 {
			st.Apply(Record{Key: key, Value: value, Offset: int64(i)})
		}
		_ = dumpState(st)
	})
}
