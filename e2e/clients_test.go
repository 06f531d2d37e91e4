package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Debian's kcat (librdkafka 2.0): metadata, produce with every codec,
// consume, group consume and offsets by timestamp.
func TestKcat(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "kc", 3, nil)

	var meta struct {
		Brokers []struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int `json:"partition"`
				Leader    int `json:"leader"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	out := run(t, 30*time.Second, "", "kcat", "-b", b.addr, "-L", "-J")
	if err := json.Unmarshal([]byte(out), &meta); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	if len(meta.Brokers) != 1 || meta.Brokers[0].Name != b.addr {
		t.Errorf("kcat -L brokers = %+v, want one at %s", meta.Brokers, b.addr)
	}
	found := false
	for _, tp := range meta.Topics {
		if tp.Topic == "kc" {
			found = len(tp.Partitions) == 3 && tp.Partitions[0].Leader == 1
		}
	}
	if !found {
		t.Errorf("kcat -L: topic kc with 3 partitions led by broker 1 missing: %s", out)
	}

	var want []string
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var lines []string
		for i := 0; i < 500; i++ {
			lines = append(lines, fmt.Sprintf("%s-%03d %s", codec, i, strings.Repeat("x", i%50)))
		}
		run(t, 30*time.Second, strings.Join(lines, "\n")+"\n", "kcat", "-b", b.addr, "-P", "-t", "kc", "-z", codec, "-X", "linger.ms=20")
		want = append(want, lines...)
	}
	sort.Strings(want)

	got := outputLines(run(t, 30*time.Second, "", "kcat", "-b", b.addr, "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%s\n"))
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("kcat -C read %d lines, want the %d produced; %s", len(got), len(want), lineDiff(got, want))
	}

	got = outputLines(run(t, 60*time.Second, "", "kcat", "-b", b.addr, "-G", "kcat-group", "kc",
		"-X", "auto.offset.reset=earliest", "-c", fmt.Sprint(len(want)), "-q", "-f", "%s\n"))
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("kcat -G read %d lines, want %d; %s", len(got), len(want), lineDiff(got, want))
	}
	committed, err := b.admin(t).FetchOffsets(context.Background(), "kcat-group")
	if err != nil || committed.Error() != nil {
		t.Fatalf("kcat-group offsets: %v %v", err, committed.Error())
	}
	var sum int64
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != int64(len(want)) {
		t.Errorf("kcat-group committed %d records in all, want %d", sum, len(want))
	}

	// Offsets by timestamp: records at known times, then kcat -Q.
	b.createTopic(t, "kq", 1, nil)
	cl := b.client(t, kgo.DefaultProduceTopic("kq"))
	base := time.UnixMilli(1_700_000_000_000)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		ts   int64
		want string
	}{
		{base.UnixMilli(), "offset 0"},
		{base.Add(4*time.Minute + time.Second).UnixMilli(), "offset 5"},
		{base.Add(time.Hour).UnixMilli(), "offset -1"}, // after the last record: none
	} {
		out := run(t, 30*time.Second, "", "kcat", "-b", b.addr, "-Q", "-t", fmt.Sprintf("kq:0:%d", c.ts))
		if !strings.Contains(out, c.want) {
			t.Errorf("kcat -Q at %d: %q, want %q", c.ts, strings.TrimSpace(out), c.want)
		}
	}
}

// Debian's kafka-python 2.0.2: a gzip producer and a group consumer.
func TestKafkaPython(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "py", 2, nil)
	script := `
import sys
from kafka import KafkaProducer, KafkaConsumer
addr = sys.argv[1]
p = KafkaProducer(bootstrap_servers=addr, compression_type='gzip', acks='all')
for i in range(2000):
    p.send('py', key=b'k%d' % (i % 10), value=b'v%d' % i)
p.flush()
p.close()
c = KafkaConsumer('py', bootstrap_servers=addr, group_id='pygroup', auto_offset_reset='earliest',
                  enable_auto_commit=False, consumer_timeout_ms=20000)
seen = set()
for m in c:
    seen.add(m.value)
    if len(seen) == 2000:
        break
c.commit()
c.close()
print(len(seen))
`
	out := run(t, 2*time.Minute, "", "/usr/bin/python3", "-c", script, b.addr)
	if strings.TrimSpace(out) != "2000" {
		t.Fatalf("kafka-python consumer saw %q distinct records, want 2000", strings.TrimSpace(out))
	}
	committed, err := b.admin(t).FetchOffsets(context.Background(), "pygroup")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != 2000 {
		t.Errorf("pygroup committed %d in all, want 2000", sum)
	}
}

// kafka-python's admin client on ACLs: millrace has no authorizer and says
// so (SECURITY_DISABLED), as Kafka does without one.
func TestKafkaPythonACLs(t *testing.T) {
	b := startBroker(t)
	script := `
import sys
from kafka.admin import KafkaAdminClient, ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter, ResourceType, ACLResourcePatternType
from kafka.errors import SecurityDisabledError
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1])
f = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
              resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
try:
    admin.describe_acls(f)
    print("no error")
except SecurityDisabledError as e:
    print("SecurityDisabledError")
admin.close()
`
	out := run(t, time.Minute, "", "/usr/bin/python3", "-c", script, b.addr)
	if strings.TrimSpace(out) != "SecurityDisabledError" {
		t.Errorf("kafka-python describe_acls: %q, want SecurityDisabledError", strings.TrimSpace(out))
	}
}

// franz-go's kadm.DescribeProducers against a broker process: the
// idempotent producer a partition remembers, before and after a crash
// (the state is rebuilt from the snapshot and the log).
func TestDescribeProducersAcrossRestart(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "idem", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	producer := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 7; i++ {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "idem", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	id, epoch, err := producer.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	producer.Close()
	check := func(when string) {
		t.Helper()
		s := kadm.TopicsSet{}
		s.Add("idem", 1)
		described, err := b.admin(t).DescribeProducers(ctx, s)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		p := described["idem"].Partitions[1]
		got, ok := p.ActiveProducers[id]
		if p.Err != nil || len(p.ActiveProducers) != 1 || !ok || got.ProducerEpoch != epoch || got.LastSequence != 6 {
			t.Errorf("%s: idem/1 %+v; want producer %d (epoch %d) alone, last sequence 6", when, p, id, epoch)
		}
	}
	check("before the crash")
	b.restart(syscall.SIGKILL)
	check("after the crash")
}

// outputLines splits a command's output into its lines. Only the final
// newline goes: the records end in spaces, which are part of the data.
func outputLines(out string) []string {
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// lineDiff names the lines missing from got and the extra ones (duplicates
// included), a few of each.
func lineDiff(got, want []string) string {
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	for _, l := range got {
		count[l]--
	}
	var missing, extra []string
	for l, n := range count {
		for ; n > 0; n-- {
			missing = append(missing, l)
		}
		for ; n < 0; n++ {
			extra = append(extra, l)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return fmt.Sprintf("missing %d %q, extra %d %q", len(missing), head(missing, 5), len(extra), head(extra, 5))
}

func head(s []string, n int) []string {
	return s[:min(n, len(s))]
}
