package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"millrace/schemas"
)

// TestSinkSchemaEvolution: a sink lands clicks, some already carrying a new
// field (a new producer ahead of the sink: the field is kept in properties);
// it is stopped and restarted with two new optional fields declared
// (--field campaign:string --field items:int64) and lands events of which some
// carry them, some carry null and some lack them. DuckDB reads the old and new
// files as one table: old rows are NULL in the new columns, new rows have
// typed values, every count exact; the footers carry the two schema versions
// and fingerprints, which `millrace lake inspect` (an independent reader) shows.
func TestSinkSchemaEvolution(t *testing.T) {
	const (
		topic, group = "clicks", "lake"
		oldEvents    = 3000 // [0, 3000): old producers
		earlyEvents  = 500  // [3000, 3500): the new field, before the sink knows it
		newEvents    = 2000 // [3500, 5500): after the restart
		firstNew     = oldEvents + earlyEvents
	)
	b := startBroker(t)
	b.createTopic(t, topic, 2, nil)
	root := t.TempDir()
	out := "file://" + root

	// A declaration that cannot work is refused before the sink starts, from
	// the config file as from the flag.
	bad := filepath.Join(t.TempDir(), "sink.yaml")
	if err := os.WriteFile(bad, []byte("lake:\n  fields: [\"dt:string\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--config", bad}, {"--field", "url:string"}, {"--field", "campaign:text"}} {
		args = append([]string{"sink", "-b", b.addr, "--group", group, "--topic", topic, "--schema", "click", "--out", out}, args...)
		if _, stderr, err := runErr(30*time.Second, "", millraceBin, args...); err == nil || !strings.Contains(stderr, "field") {
			t.Errorf("%v: err %v, stderr %q; want a refusal naming the field", args, err, stderr)
		}
	}

	want := produceClicks(t, b, topic, 0, oldEvents, 2, nil)
	early := produceClicks(t, b, topic, oldEvents, firstNew, 2, func(int) string { return `,"campaign":"early"` })
	sink := startSink(t, b, "sink-v1", group, topic, out)
	waitLanded(t, b, group, topic, time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Fatalf("sink-v1: status %d after SIGTERM", sink.exitCode())
	}

	// Of the new events, even ones carry both fields, i%4 == 1 carries
	// explicit nulls, i%4 == 3 neither.
	later := produceClicks(t, b, topic, firstNew, firstNew+newEvents, 2, func(i int) string {
		switch {
		case i%2 == 0:
			return fmt.Sprintf(`,"campaign":"spring-%d","items":%d`, i%3, i%7)
		case i%4 == 1:
			return `,"campaign":null,"items":null`
		}
		return ""
	})
	for _, m := range []map[string]int{early, later} {
		for h, n := range m {
			want[h] += n
		}
	}
	sink = startSink(t, b, "sink-v3", group, topic, out, "--field", "campaign:string", "--field", "items:int64")
	waitLanded(t, b, group, topic, time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Fatalf("sink-v3: status %d after SIGTERM", sink.exitCode())
	}

	glob := root + "/clicks/**/*.parquet"
	checkLake(t, glob, want)
	db := openDuck(t)
	src := fmt.Sprintf("read_parquet('%s', hive_partitioning=true, union_by_name=true, filename=true)", glob)

	var campaignType, itemsType string
	if err := db.QueryRow(`SELECT typeof(campaign), typeof(items) FROM `+src+` LIMIT 1`).Scan(&campaignType, &itemsType); err != nil {
		t.Fatal(err)
	}
	if campaignType != "VARCHAR" || itemsType != "BIGINT" {
		t.Errorf("column types %s, %s; want VARCHAR, BIGINT", campaignType, itemsType)
	}

	// Every row's new columns against what its event carried; n is the
	// event number (properties.n).
	var wrongCampaign, wrongItems, withCampaign, earlyInProps, campaignInProps int64
	err := db.QueryRow(fmt.Sprintf(`SELECT
		count(*) FILTER (WHERE campaign IS DISTINCT FROM CASE WHEN n >= %[1]d AND n %% 2 = 0 THEN 'spring-' || (n %% 3) END),
		count(*) FILTER (WHERE items IS DISTINCT FROM CASE WHEN n >= %[1]d AND n %% 2 = 0 THEN n %% 7 END),
		count(*) FILTER (WHERE campaign IS NOT NULL),
		count(*) FILTER (WHERE json_extract_string(properties, '$.campaign') = 'early' AND n >= %[2]d AND n < %[1]d),
		count(*) FILTER (WHERE json_extract(properties, '$.campaign') IS NOT NULL)
		FROM (SELECT *, CAST(json_extract(properties, '$.n') AS BIGINT) AS n FROM %[3]s)`, firstNew, oldEvents, src)).
		Scan(&wrongCampaign, &wrongItems, &withCampaign, &earlyInProps, &campaignInProps)
	if err != nil {
		t.Fatal(err)
	}
	if wrongCampaign != 0 || wrongItems != 0 || withCampaign != newEvents/2 || earlyInProps != earlyEvents || campaignInProps != earlyEvents {
		t.Errorf("rows with a wrong campaign %d, wrong items %d; with campaign %d (want %d); "+
			"early campaign kept in properties %d, any campaign in properties %d (want %d, %d)",
			wrongCampaign, wrongItems, withCampaign, newEvents/2, earlyInProps, campaignInProps, earlyEvents, earlyEvents)
	}

	// Rows per schema version and fingerprint, from each file's footer.
	v3, err := schemas.Click.Extend(mustDecl(t, "campaign:string"), mustDecl(t, "items:int64"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(fmt.Sprintf(`WITH meta AS (
			SELECT file_name,
				max(decode(value)) FILTER (WHERE decode(key) = '%s') AS version,
				max(decode(value)) FILTER (WHERE decode(key) = '%s') AS fingerprint
			FROM parquet_kv_metadata('%s') GROUP BY file_name)
		SELECT version, fingerprint, count(*) FROM %s r JOIN meta ON r.filename = meta.file_name
		GROUP BY version, fingerprint ORDER BY version`,
		schemas.MetaSchemaVersion, schemas.MetaSchemaFingerprint, glob, src))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []string
	for rows.Next() {
		var version, fingerprint string
		var n int64
		if err := rows.Scan(&version, &fingerprint, &n); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, fmt.Sprintf("v%s %s: %d", version, fingerprint, n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantVersions := []string{
		fmt.Sprintf("v%d %s: %d", schemas.Click.Version, schemas.Click.Fingerprint(), firstNew),
		fmt.Sprintf("v%d %s: %d", v3.Version, v3.Fingerprint(), newEvents),
	}
	if fmt.Sprint(versions) != fmt.Sprint(wantVersions) {
		t.Errorf("rows per schema version:\n got %v\nwant %v", versions, wantVersions)
	}

	// The independent reader sees both versions, and reads the old files.
	inspect := run(t, time.Minute, "", millraceBin, "lake", "inspect", root+"/clicks")
	for _, s := range []*schemas.Schema{schemas.Click, v3} {
		if line := fmt.Sprintf("schema: click v%d (fingerprint %s)", s.Version, s.Fingerprint()); !strings.Contains(inspect, line) {
			t.Errorf("lake inspect does not show %q", line)
		}
	}
	if !strings.Contains(inspect, fmt.Sprintf(" files, %d rows\n", firstNew+newEvents)) || !strings.Contains(inspect, "campaign OPTIONAL BYTE_ARRAY") {
		t.Errorf("lake inspect: not every row, or no campaign column:\n%s", tail([]byte(inspect), 2048))
	}
}

func mustDecl(t *testing.T, decl string) schemas.Field {
	t.Helper()
	f, err := schemas.ParseFieldDecl(decl)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
