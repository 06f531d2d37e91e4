package kafka

// The API registry: every handler file (named by API key, like
// 03_metadata.go) registers its key, the versions it serves and its handler in
// init(). ApiVersions answers from this table, so the list of supported APIs
// lives in exactly one place.
//
// Requests the registry does not cover:
//   - ApiVersions at a version above the highest served is answered with
//     UNSUPPORTED_VERSION (35) in a version 0 body that lists every served
//     API, and a version 0 response header (KIP-511), so the client can retry
//     with a version both sides know.
//   - Any other unknown API key, or a version outside the served range, closes
//     the connection with a log line naming the client, key and version. This
//     is what Kafka does: such a request cannot be parsed, so there is no way
//     to know where its body ends or how to shape an error response, and a
//     client that respects ApiVersions never sends one.
//
// Adding an API: a file named <key>_<name>.go with the header comment and an
// init() calling regKey (or regBlockingKey for handlers that wait: long-poll
// Fetch, anything waiting on other clients). Produce with acks=0 returns
// noResponse. Handlers reach the metadata model as b.cluster, partition logs
// through b.cluster.Partition or b.logs, the coordination store as b.store.
// Broker-lifetime state a handler needs beyond those (the ACL cache, the
// producer ID blocks, the replica manager) is a typed field of Broker, a
// part: new state gets its own field, opened in openParts (broker.go) after
// the parts it uses and closed in reverse by closeParts. Per-partition
// state (idempotent producers) lives with the partition's log.

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler serves one request. It returns the response (its version is set by
// the caller to the request's), noResponse to send nothing (acks=0 Produce),
// or a Go error, which closes the connection: Kafka errors are response data,
// so an error return means the request cannot be answered at all. ctx is
// cancelled when the connection or the broker closes.
type handler func(ctx context.Context, b *Broker, r *request) (kmsg.Response, error)

// apiEntry is one registered API.
type apiEntry struct {
	key      int16
	min, max int16
	handle   handler
	// blocking handlers may wait a long time (JoinGroup waits for the whole
	// group, a long-poll Fetch for data). They run on their own goroutine so
	// the requests behind them on the connection are read and served
	// meanwhile; responses still go out in request order. Other handlers run
	// one at a time in request order, which is what Kafka guarantees per
	// connection and what an idempotent producer's pipelined Produce
	// requests rely on.
	blocking bool
}

// registry is indexed by API key; nil for unserved keys.
var registry = map[int16]*apiEntry{}

// regKey registers an ordered handler; see apiEntry.
func regKey(key, min, max int16, h handler) { register(key, min, max, h, false) }

// regBlockingKey registers a blocking handler; see apiEntry.blocking.
func regBlockingKey(key, min, max int16, h handler) { register(key, min, max, h, true) }

func register(key, min, max int16, h handler, blocking bool) {
	req := kmsg.RequestForKey(key)
	// These are programming errors in a handler file, found by any test run.
	switch {
	case req == nil:
		panic(fmt.Sprintf("kafka: registering API key %d, which kmsg does not know", key))
	case registry[key] != nil:
		panic(fmt.Sprintf("kafka: API key %d registered twice", key))
	case min < 0 || min > max:
		panic(fmt.Sprintf("kafka: API key %d: bad version range %d..%d", key, min, max))
	case max > req.MaxVersion():
		panic(fmt.Sprintf("kafka: API key %d: version %d is newer than kmsg's %d", key, max, req.MaxVersion()))
	}
	registry[key] = &apiEntry{key: key, min: min, max: max, handle: h, blocking: blocking}
}

// lookup returns the entry serving key at version, if any.
func lookup(key, version int16) (*apiEntry, bool) {
	e := registry[key]
	if e == nil || version < e.min || version > e.max {
		return e, false
	}
	return e, true
}

// servedAPIs lists the registry sorted by key, for ApiVersions.
func servedAPIs() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(registry))
	for _, e := range registry {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = e.key, e.min, e.max
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// noResponse is returned by a handler whose request gets no response
// (Produce with acks=0). It is a distinct value, not nil, so that a handler
// returning nil by mistake is caught rather than leaving the client waiting.
var noResponse kmsg.Response = noResponseT{}

type noResponseT struct{ kmsg.Response }
