package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestQuotaCLI: millrace quota set, list and delete against a broker
// process, for a user+client-id, the user default and the client-id
// default; what the CLI set is what kadm's DescribeClientQuotas reads
// back, and so does kafka-python at version 0 of the API (Debian's
// kafka-python 2.0.2 has no quota admin call, so the test declares the
// request in kafka-python's protocol types; confluent-kafka 1.7.0 and
// kcat have no quota API at all).
func TestQuotaCLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	quota := func(args ...string) string {
		return run(t, time.Minute, "", millraceBin, append(append([]string{"quota"}, args...), "-b", b.addr)...)
	}
	quota("set", "--user", "alice", "--client-id", "app", "producer_byte_rate=1048576", "request_percentage=25")
	quota("set", "--user-default", "consumer_byte_rate=2097152")
	quota("set", "--client-default", "controller_mutation_rate=2.5")

	out := quota("list")
	for _, want := range []string{
		"{user=alice, client-id=app}", "producer_byte_rate=1048576", "request_percentage=25",
		"{user=<default>}", "consumer_byte_rate=2097152",
		"{client-id=<default>}", "controller_mutation_rate=2.5",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("quota list lacks %q:\n%s", want, out)
		}
	}
	if out := quota("list", "--user", "alice"); !strings.Contains(out, "user=alice") || strings.Contains(out, "<default>") {
		t.Errorf("quota list --user alice:\n%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	described, err := b.admin(t).DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(described) != 3 {
		t.Fatalf("kadm described %v (%v), want the 3 entities the CLI set", described, err)
	}

	py := run(t, time.Minute, "", "/usr/bin/python3", "-c", pythonDescribeQuotas, b.addr)
	for _, want := range []string{
		"user=alice,client-id=app producer_byte_rate=1048576 request_percentage=25",
		"user=<default> consumer_byte_rate=2097152",
		"client-id=<default> controller_mutation_rate=2.5",
	} {
		if !strings.Contains(py, want+"\n") {
			t.Errorf("kafka-python's DescribeClientQuotas v0 lacks %q:\n%s", want, py)
		}
	}

	quota("delete", "--user", "alice", "--client-id", "app", "request_percentage")
	quota("delete", "--user-default", "consumer_byte_rate")
	out = quota("list")
	if strings.Contains(out, "request_percentage") || strings.Contains(out, "user=<default>") || !strings.Contains(out, "producer_byte_rate=1048576") {
		t.Errorf("after delete:\n%s", out)
	}

	// A wrong key is refused before anything is sent, with the keys named.
	_, errOut, err := runErr(time.Minute, "", millraceBin, "quota", "set", "--client-default", "bytes=1", "-b", b.addr)
	if err == nil || !strings.Contains(errOut, "producer_byte_rate") {
		t.Errorf("set bytes=1: %v %s", err, errOut)
	}
}

// pythonDescribeQuotas sends DescribeClientQuotas v0 (no filter) with
// kafka-python's client and prints one line per entity: its components
// and its values.
const pythonDescribeQuotas = `import struct, sys
from kafka.client_async import KafkaClient
from kafka.protocol.api import Request, Response
from kafka.protocol.types import AbstractType, Array, Boolean, Int8, Int16, Int32, Schema, String

class Float64(AbstractType):
    @classmethod
    def encode(cls, value):
        return struct.pack('>d', value)
    @classmethod
    def decode(cls, data):
        return struct.unpack('>d', data.read(8))[0]

class DescribeClientQuotasResponse_v0(Response):
    API_KEY = 48
    API_VERSION = 0
    SCHEMA = Schema(
        ('throttle_time_ms', Int32), ('error_code', Int16), ('error_message', String('utf-8')),
        ('entries', Array(
            ('entity', Array(('entity_type', String('utf-8')), ('entity_name', String('utf-8')))),
            ('values', Array(('key', String('utf-8')), ('value', Float64))))))

class DescribeClientQuotasRequest_v0(Request):
    API_KEY = 48
    API_VERSION = 0
    RESPONSE_TYPE = DescribeClientQuotasResponse_v0
    SCHEMA = Schema(
        ('components', Array(('entity_type', String('utf-8')), ('match_type', Int8), ('match', String('utf-8')))),
        ('strict', Boolean))

client = KafkaClient(bootstrap_servers=sys.argv[1], api_version=(2, 6, 0))
node = None
while node is None:
    client.poll(timeout_ms=100)
    node = client.least_loaded_node()
    if node is not None and not client.ready(node):
        client.poll(timeout_ms=100)
        if not client.ready(node):
            node = None
future = client.send(node, DescribeClientQuotasRequest_v0(components=[], strict=False))
client.poll(future=future, timeout_ms=10000)
resp = future.value
if resp.error_code:
    sys.exit('error %d %s' % (resp.error_code, resp.error_message))
for entity, values in resp.entries:
    print(','.join('%s=%s' % (t, n if n is not None else '<default>') for t, n in entity), ' '.join('%s=%s' % (k, repr(v).rstrip('0').rstrip('.')) for k, v in values))
client.close()
`
