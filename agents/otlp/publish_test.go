package otlp

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"

	"millrace/agents/ship"
)

// heldProducer takes records and keeps their acknowledgements until
// release, as a producer does whose batch went to a broker that died: the
// records settle only once the connection fails or the broker is back.
type heldProducer struct {
	*fakeProducer
	mu   sync.Mutex // guards acks
	acks []func()
}

func (p *heldProducer) TryProduce(_ context.Context, rec *kgo.Record, ack ship.AckFunc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acks = append(p.acks, func() { ack(rec, nil) })
	return nil
}

// held is the number of records whose acknowledgement is held.
func (p *heldProducer) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acks)
}

// release acknowledges every record held.
func (p *heldProducer) release() {
	p.mu.Lock()
	acks := p.acks
	p.acks = nil
	p.mu.Unlock()
	for _, ack := range acks {
		ack()
	}
}

// TestUnacknowledgedAnswersInTime: a request whose records the producer
// neither acknowledges nor fails is answered 503 with Retry-After after
// ack_timeout, not once the records settle; an acknowledgement that comes
// later is still counted.
func TestUnacknowledgedAnswersInTime(t *testing.T) {
	t.Parallel()
	p := &heldProducer{fakeProducer: newFakeProducer()}
	r, err := New(Config{HTTPAddr: "127.0.0.1:0", AckTimeout: 50 * time.Millisecond}, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.release()
	body, _ := new(plog.ProtoMarshaler).MarshalLogs(testLogs(1, 2))
	w := post(r, "/v1/logs", contentProto, "", body)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	p.release()
	if got := testutil.ToFloat64(r.metrics.produced.WithLabelValues("logs")); got != 2 {
		t.Fatalf("%v log records counted as produced after the late acknowledgement, want 2", got)
	}
}
