package kafka

import (
	"math"
	"testing"
	"time"
)

// TestByteRate: a leader.replication.throttled.rate of 1000 bytes per
// second lets a second's worth through, is exceeded once a response
// overdraws it, and refills at the rate.
func TestByteRate(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	r := byteRate{rate: 1000}
	if !r.bounded() || r.Exceeded(t0) {
		t.Fatalf("a fresh rate must allow a second's worth")
	}
	r.Record(1500, t0) // a response is recorded after it is read
	if !r.Exceeded(t0.Add(400 * time.Millisecond)) {
		t.Errorf("500 bytes overdrawn, 400 refilled: want exceeded")
	}
	if r.Exceeded(t0.Add(600 * time.Millisecond)) {
		t.Errorf("500 bytes overdrawn, 600 refilled: want allowed")
	}
	r.Record(100, t0.Add(10*time.Second))
	if r.tokens != 900 {
		t.Errorf("an idle rate refills to one second's worth only: %v tokens after 100 bytes, want 900", r.tokens)
	}
	if (&byteRate{rate: math.MaxInt64}).bounded() {
		t.Errorf("Kafka's default rate (Long.MaxValue) must bound nothing")
	}
}
