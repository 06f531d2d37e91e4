package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas"
	"millrace/sinks/parquet"
)

func TestMainReportsOneLineErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"topic", "create"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2 for a usage error", code)
	}
	if first := strings.SplitN(errOut.String(), "\n", 2)[0]; first != "millrace topic create: expected 1 argument(s), got 0" {
		t.Fatalf("stderr first line %q", first)
	}
	errOut.Reset()
	if code := Main([]string{"nosuch"}, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "nosuch"`) {
		t.Fatalf("exit %d stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := Main([]string{"topic", "list", "-b", "127.0.0.1:1"}, strings.NewReader(""), &out, &errOut); code != 1 || strings.Count(errOut.String(), "\n") != 1 {
		t.Fatalf("exit %d stderr %q: want one line and exit 1 for an unreachable broker", code, errOut.String())
	}
	if code := Main([]string{"produce", "t", "--acks", "2"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Fatalf("bad --acks: exit %d", code)
	}
}

// TestHelpListsFlags: --help prints the usage line and then every flag
// with its type, text and default, and exits 0; flags without a text
// (fault injection) stay out.
func TestHelpListsFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"sink", "--help"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("sink --help: exit %d, want 0", code)
	}
	help := errOut.String()
	for _, want := range []string{
		"usage: millrace sink -b BROKERS",
		"\nflags:\n",
		"  -b, --brokers string\n        seed brokers, comma-separated (default ",
		"  --roll-rows int\n        end a commit window after N rows (default 1000000)\n",
		"  --field NAME:TYPE\n",
		"  --shutdown-timeout duration\n        how long to publish and commit on shutdown (default 1m0s)\n",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("sink --help lacks %q:\n%s", want, help)
		}
	}
	for _, unwanted := range []string{"crash-after-publish", "  -b string", "(shorthand)"} {
		if strings.Contains(help, unwanted) {
			t.Errorf("sink --help shows %q:\n%s", unwanted, help)
		}
	}
	errOut.Reset()
	if code := Main([]string{"topic", "create", "-h"}, strings.NewReader(""), &out, &errOut); code != 0 ||
		!strings.Contains(errOut.String(), "  --partitions int\n") {
		t.Fatalf("topic create -h: exit %d:\n%s", code, errOut.String())
	}
}

func TestRecordFormat(t *testing.T) {
	r := &kgo.Record{Topic: "t", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("v"),
		Timestamp: time.UnixMilli(1700000000123), Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}}
	for format, want := range map[string]string{
		"%v":              "v\n",
		"%k %v":           "k v\n",
		`%t/%p@%o\t%T %h`: "t/3@42\t1700000000123 a=1,b=2\n",
		"100%% %x %v":     "100%% %x v\n",
		"key=%k\n":        "key=k\n",
	} {
		var b bytes.Buffer
		parseFormat(format).write(&b, r)
		if b.String() != want {
			t.Errorf("format %q: got %q, want %q", format, b.String(), want)
		}
	}
}

// Kafka's default partitioner is toPositive(murmur2(key)) % partitions; these
// hashes are the reference values from Kafka's own murmur2 tests, so keys land
// where Java clients put them.
func TestHashPartitionerMatchesKafka(t *testing.T) {
	opts, err := producerOpts("all", "none", "hash")
	if err != nil {
		t.Fatal(err)
	}
	var partitioner kgo.Partitioner
	for _, o := range opts {
		if p, ok := partitionerOf(o); ok {
			partitioner = p
		}
	}
	if partitioner == nil {
		t.Fatal("hash option sets no partitioner")
	}
	tp := partitioner.ForTopic("t")
	for key, murmur := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		for _, n := range []int{1, 3, 6, 7, 100} {
			want := int(murmur&0x7fffffff) % n
			if got := tp.Partition(&kgo.Record{Key: []byte(key)}, n); got != want {
				t.Errorf("key %q over %d partitions: partition %d, Kafka puts it in %d", key, n, got, want)
			}
		}
	}
}

func partitionerOf(o kgo.Opt) (kgo.Partitioner, bool) {
	cl, err := kgo.NewClient(o)
	if err != nil {
		return nil, false
	}
	defer cl.Close()
	p, ok := cl.OptValue(kgo.RecordPartitioner).(kgo.Partitioner)
	return p, ok && p != nil
}

func TestLatencyHistogramQuantiles(t *testing.T) {
	var h latencyHistogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 500 * time.Millisecond, 0.99: 990 * time.Millisecond, 0.999: 999 * time.Millisecond} {
		got := h.quantile(q)
		if got < want || float64(got) > float64(want)*1.051 {
			t.Errorf("p%v = %v, want within 5%% above %v", q*100, got, want)
		}
	}
	if h.max() != time.Second || roundSignificant(1234567*time.Nanosecond) != 1230*time.Microsecond {
		t.Errorf("max %v", h.max())
	}
	var empty latencyHistogram
	if empty.quantile(0.5) != 0 {
		t.Error("empty histogram has a median")
	}
}

func TestLakeInspectLocalPaths(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"a.parquet", "b.parquet"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		w, err := parquet.NewWriter(f, schemas.Click, parquet.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j <= i; j++ {
			if err := w.Append([]byte(`{"type":"page_view","ts":"2024-05-01T10:00:0`+strconv.Itoa(j)+`Z"}`), time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for target, want := range map[string]string{
		dir:                             "\ntotal: 2 files, 3 rows\n",
		"file://" + dir:                 "\ntotal: 2 files, 3 rows\n",
		"file://" + dir + "/b.parquet":  "rows: 2\n",
		filepath.Join(dir, "a.parquet"): "ts: min 2024-05-01T10:00:00Z max 2024-05-01T10:00:00Z\n",
	} {
		var out, errOut bytes.Buffer
		if code := Main([]string{"lake", "inspect", target}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("lake inspect %s: exit %d, want %q in:\n%s%s", target, code, want, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"lake", "inspect", t.TempDir()}, strings.NewReader(""), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no .parquet files under") {
		t.Errorf("empty directory: exit %d, stderr %q", code, errOut.String())
	}
}
