package parquet

import (
	"testing"

	"millrace/schemas"
	"millrace/sinks/parquet/parquettest"
)

// clickV2Row is a v2 click file's row: v1's columns plus the optional screen.
type clickV2Row struct {
	EventID     *string `parquet:"name=event_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Type        string  `parquet:"name=type, type=BYTE_ARRAY, convertedtype=UTF8"`
	URL         *string `parquet:"name=url, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Referrer    *string `parquet:"name=referrer, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Title       *string `parquet:"name=title, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	AnonymousID *string `parquet:"name=anonymous_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	UserID      *string `parquet:"name=user_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	SessionID   *string `parquet:"name=session_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	TS          *int64  `parquet:"name=ts, type=INT64, repetitiontype=OPTIONAL"`
	ReceivedAt  *int64  `parquet:"name=received_at, type=INT64, repetitiontype=OPTIONAL"`
	IP          *string `parquet:"name=ip, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	UserAgent   *string `parquet:"name=user_agent, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Properties  *string `parquet:"name=properties, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Screen      *string `parquet:"name=screen, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
}

// TestSchemaEvolution writes a file with click v1, then one with a v2 that adds
// an optional field (declared as a user would, "screen:string"), from events
// of old and new producers, and reads both back.
func TestSchemaEvolution(t *testing.T) {
	screen, err := schemas.ParseFieldDecl("screen:string")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := schemas.Click.Extend(screen)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.CheckEvolution(schemas.Click, v2); err != nil {
		t.Fatal(err)
	}
	oldEvent := `{"type":"click","url":"https://e/1","ts":"2024-05-01T10:00:00Z"}`
	newEvent := `{"type":"click","url":"https://e/2","ts":"2024-05-01T10:00:01Z","screen":"1920x1080"}`

	// Before the upgrade: a v1 sink sees a new producer's field and keeps it.
	oldPath, _ := writeFile(t, schemas.Click, Options{}, []string{oldEvent, newEvent})
	oldRows, err := ReadRows[parquettest.ClickRow](oldPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(oldRows) != 2 || oldRows[0].Properties != nil || *oldRows[1].Properties != `{"screen":"1920x1080"}` {
		t.Fatalf("v1 file rows: %s / %s", show(oldRows[0]), show(oldRows[1]))
	}

	// After: a v2 sink reads old producers' events (screen null) and new ones.
	newPath, _ := writeFile(t, v2, Options{}, []string{oldEvent, newEvent})
	newRows, err := ReadRows[clickV2Row](newPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(newRows) != 2 || newRows[0].Screen != nil || *newRows[1].Screen != "1920x1080" ||
		newRows[1].Properties != nil || *newRows[1].URL != "https://e/2" {
		t.Fatalf("v2 file rows: %+v / %+v", newRows[0], newRows[1])
	}

	// The old file still reads with the old row type and reports its version;
	// v1's columns are a prefix of v2's, so engines that union by name line up.
	oldInfo, err := Inspect(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	newInfo, err := Inspect(newPath)
	if err != nil {
		t.Fatal(err)
	}
	if oldInfo.SchemaVersion != schemas.Click.Version || newInfo.SchemaVersion != v2.Version {
		t.Errorf("versions %d and %d", oldInfo.SchemaVersion, newInfo.SchemaVersion)
	}
	if oldInfo.SchemaFingerprint != schemas.Click.Fingerprint() || newInfo.SchemaFingerprint != v2.Fingerprint() ||
		oldInfo.SchemaFingerprint == newInfo.SchemaFingerprint {
		t.Errorf("fingerprints %q and %q, want %q and %q", oldInfo.SchemaFingerprint, newInfo.SchemaFingerprint,
			schemas.Click.Fingerprint(), v2.Fingerprint())
	}
	if len(newInfo.Columns) != len(oldInfo.Columns)+1 {
		t.Fatalf("columns %d vs %d", len(newInfo.Columns), len(oldInfo.Columns))
	}
	for i, c := range oldInfo.Columns {
		if newInfo.Columns[i] != c {
			t.Errorf("column %d changed: %+v -> %+v", i, c, newInfo.Columns[i])
		}
	}
}
