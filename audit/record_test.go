package audit

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestSourceKeys(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"log", LogSource("web1", "/var/log/app.log"), "web1:/var/log/app.log"},
		{"click host lower-cased, port dropped", ClickSource("https://Shop.Example.com:8443/cart?x=1"), "shop.example.com"},
		{"click ipv6", ClickSource("http://[::1]:80/"), "::1"},
		{"click empty", ClickSource(""), NoSource},
		{"click relative", ClickSource("/just/a/path"), NoSource},
		{"click unparsable", ClickSource("http://%zz"), NoSource},
		{"click user info dropped", ClickSource("https://user:pw@Shop.example/"), "shop.example"},
		{"click query right after the host", ClickSource("HTTPS://shop.example?utm=x"), "shop.example"},
		{"click fragment right after the host", ClickSource("http://shop.example#top"), "shop.example"},
		{"click no host", ClickSource("https:///path"), NoSource},
		{"click no scheme", ClickSource("://shop.example/"), NoSource},
		{"click not a url", ClickSource("mailto:someone@shop.example"), NoSource},
		{"click space in host", ClickSource("http://shop example/"), NoSource},
		{"click unclosed ipv6", ClickSource("http://[::1/"), NoSource},
		{"metric", MetricSource("node-7"), "node-7"},
		{"metric empty", MetricSource(""), NoSource},
		{"syslog", SyslogSource("web1", "nginx"), "web1/nginx"},
		{"syslog without host", SyslogSource("", "kernel"), "/kernel"},
		{"syslog malformed", SyslogSource("", ""), NoSource},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestHour(t *testing.T) {
	ts := time.Date(2026, 12, 2, 4, 59, 59, 0, time.FixedZone("x", 3600))
	if got := Hour(ts); got != "2026-12-02T03" {
		t.Fatalf("Hour = %q, want the UTC hour 2026-12-02T03", got)
	}
	back, err := ParseHour("2026-12-02T03")
	if err != nil || !back.Equal(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)) {
		t.Fatalf("ParseHour = %v, %v", back, err)
	}
	if _, err := ParseHour("2026-12-02 03"); err == nil {
		t.Fatal("ParseHour accepted a malformed hour")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Role: RoleTail, Instance: "i1", Topic: "logs", Source: "h:/a/b.log", Hour: "2026-12-02T03",
		Accepted: 7, Distinct: true, UpdatedAt: time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)}
	if got := r.Key(); got != "tail/i1/logs/h:/a/b.log/2026-12-02T03" {
		t.Fatalf("Key = %q", got)
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"role":"tail"`, `"accepted":7`, `"distinct":true`, `"hour":"2026-12-02T03"`, `"updated_at":"2026-12-02T03:04:05Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("value %s lacks %s", b, want)
		}
	}
	back, err := ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if back != r {
		t.Fatalf("round trip: got %+v, want %+v", back, r)
	}
	sink := []byte(`{"role":"sink","instance":"g/3","topic":"clicks","source":"-","hour":"2026-12-02T03","landed":5,"deduplicated":1,"dead_lettered":2,"no_id":0,"updated_at":"2026-12-02T03:04:05Z"}`)
	s, err := ParseRecord(sink)
	if err != nil || s.Landed != 5 || s.Deduplicated != 1 || s.DeadLettered != 2 {
		t.Fatalf("sink record: %+v, %v", s, err)
	}
}

func TestParseRecordRejects(t *testing.T) {
	for name, v := range map[string]string{
		"not json":       `{`,
		"unknown role":   `{"role":"x","instance":"i","topic":"t","source":"s","hour":"2026-12-02T03"}`,
		"no instance":    `{"role":"tail","topic":"t","source":"s","hour":"2026-12-02T03"}`,
		"bad hour":       `{"role":"tail","instance":"i","topic":"t","source":"s","hour":"2026-12-02"}`,
		"negative count": `{"role":"tail","instance":"i","topic":"t","source":"s","hour":"2026-12-02T03","accepted":-1}`,
	} {
		if _, err := ParseRecord([]byte(v)); err == nil {
			t.Errorf("%s: accepted %s", name, v)
		}
	}
}

// TestBoundSource: a client-made source longer than MaxSourceBytes is cut,
// marked and hashed alike on both sides of the audit, and two long sources
// stay apart.
func TestBoundSource(t *testing.T) {
	long := "https://" + strings.Repeat("a", 1<<20) + ".example/x"
	other := "https://" + strings.Repeat("a", 1<<20) + ".example2/x"
	a, b := ClickSource(long), ClickSource(other)
	if len(a) > MaxSourceBytes || !strings.Contains(a, "...#") || a == b {
		t.Fatalf("bounded sources %q and %q", a, b)
	}
	if got := AuthoritySource(strings.Repeat("a", 1<<20) + ".example"); got != a {
		t.Fatalf("the sink's key %q differs from the beacon's %q", got, a)
	}
	path := "/var/log/" + strings.Repeat("é", 300)
	if s := LogSource("web", path); len(s) > MaxSourceBytes || !utf8.ValidString(s) {
		t.Fatalf("log source %q: %d bytes, valid UTF-8 %v", s, len(s), utf8.ValidString(s))
	}
	if s := MetricSource("short"); s != "short" {
		t.Fatalf("a short source changed: %q", s)
	}
}

// TestSourceOf: one rule for every schema, and a log line without a source
// path is NoSource wherever it is counted.
func TestSourceOf(t *testing.T) {
	fields := map[string]string{"host": "web1", "source": "/var/log/a.log", "url": "https://Shop.example/x"}
	get := func(name string) string { return fields[name] }
	if got := SourceOf("log", get); got != "web1:/var/log/a.log" {
		t.Errorf("log: %q", got)
	}
	if got := SourceOf("click", get); got != "shop.example" {
		t.Errorf("click: %q", got)
	}
	if got := SourceOf("metric", get); got != "/var/log/a.log" {
		t.Errorf("metric: %q", got)
	}
	if got := SourceOf("log", func(name string) string { return map[string]string{"host": "web1"}[name] }); got != NoSource {
		t.Errorf("log without a source path: %q, want %q", got, NoSource)
	}
}
