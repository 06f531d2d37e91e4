package kafka

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestFailureLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	fl := newFailureLimiter(2, 3, func() time.Time { return now })
	for i := range 3 {
		if !fl.take("10.0.0.1") {
			t.Fatalf("take %d within the burst of 3 refused", i)
		}
	}
	if fl.take("10.0.0.1") {
		t.Fatal("a 4th take within the same instant passed a burst of 3")
	}
	if !fl.take("10.0.0.2") {
		t.Fatal("another key shares the first key's bucket")
	}
	fl.give("10.0.0.1")
	if !fl.take("10.0.0.1") {
		t.Fatal("a refunded token is not there")
	}
	now = now.Add(500 * time.Millisecond) // rate 2/s: one token back
	if !fl.take("10.0.0.1") || fl.take("10.0.0.1") {
		t.Fatal("refill at 2/s did not give back exactly one token in 500ms")
	}
	now = now.Add(time.Hour) // never more than the burst
	for i := range 3 {
		if !fl.take("10.0.0.1") {
			t.Fatalf("take %d after an hour refused", i)
		}
	}
	if fl.take("10.0.0.1") {
		t.Fatal("the bucket refilled past its burst")
	}
}

func TestFailureLimiterBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	fl := newFailureLimiter(1, 1, func() time.Time { return now })
	for i := range maxFailureBuckets + 500 {
		fl.take("ip-" + strconv.Itoa(i))
	}
	if n := fl.size(); n > maxFailureBuckets {
		t.Fatalf("%d buckets held, bound %d", n, maxFailureBuckets)
	}
	// Once they refilled, a sweep drops them all but the new one.
	now = now.Add(time.Minute)
	fl.mu.Lock()
	fl.sweepLocked(now)
	fl.mu.Unlock()
	if n := fl.size(); n != 0 {
		t.Fatalf("%d full buckets survived a sweep", n)
	}
}

func TestFailureLimiterOff(t *testing.T) {
	fl := newFailureLimiter(0, 1, nil)
	for range 100 {
		if !fl.take("x") {
			t.Fatal("rate 0 limited")
		}
	}
	if fl.size() != 0 {
		t.Fatal("rate 0 kept buckets")
	}
}

func TestSASLGuardReserve(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := defaultSASLConfig()
	cfg.FailedAuthenticationRatePerIP, cfg.FailedAuthenticationRatePerUser, cfg.FailedAuthenticationBurst = 1, 1, 2
	g := newSASLGuard(cfg, func() time.Time { return now })
	// The user's bucket empties from two IPs; a third IP with tokens left
	// is refused for that user, and its IP token is not spent.
	if !g.reserve("a", "alice") || !g.reserve("b", "alice") {
		t.Fatal("reserve within the burst refused")
	}
	if g.reserve("c", "alice") {
		t.Fatal("a user past its burst was reserved from a third IP")
	}
	first, second, third := g.reserve("c", ""), g.reserve("c", ""), g.reserve("c", "")
	if !first || !second || third {
		t.Fatal("the refused reservation spent IP c's token")
	}
	g.refund("a", "alice") // a right password gives both back
	if !g.reserve("a", "alice") {
		t.Fatal("refunded tokens are not there")
	}
}

func TestSampledLog(t *testing.T) {
	now := time.Unix(1000, 0)
	var s sampledLog
	logged := 0
	for range 100 {
		if _, ok := s.allow("", now, 5, 10*time.Second); ok {
			logged++
		}
	}
	if logged != 5 {
		t.Fatalf("%d of 100 events logged in one window, want 5", logged)
	}
	// Another key has a budget of its own: a flood of made-up names
	// does not hide a real user's failures.
	if _, ok := s.allow("alice", now, 5, 10*time.Second); !ok {
		t.Fatal("alice's first failure was not logged after a flood of other names")
	}
	unlogged, ok := s.allow("", now.Add(10*time.Second), 5, 10*time.Second)
	if !ok || unlogged != 95 {
		t.Fatalf("first line of the next window: ok %v, unlogged %d, want true, 95", ok, unlogged)
	}
}

// TestSASLPlainThrottleAndCache: once a user's failure bucket is empty,
// PLAIN logins as that user are throttled without a check, except with a
// password verified moments ago; a changed password ends that at once.
func TestSASLPlainThrottleAndCache(t *testing.T) {
	reg := prometheus.NewRegistry()
	tb := startBroker(t, withMetrics(reg), withConfig(func(c *Config) {
		c.SASL.FailedAuthenticationDelay = time.Millisecond
		c.SASL.FailedAuthenticationRatePerIP = 0 // the user's bucket alone
		c.SASL.FailedAuthenticationRatePerUser = 1
		c.SASL.FailedAuthenticationBurst = 2
	}))
	addUser(t, tb, "alice", "right")
	login := func(password string) int16 {
		c, _ := saslConn(t, tb)
		var correlation int32
		return authenticate(t, c, mechanismFor(mechanismPlain, "alice", password), 1, &correlation).ErrorCode
	}
	counted := func(result string) float64 {
		return testutil.ToFloat64(tb.broker.metrics.saslAuth.WithLabelValues(mechanismPlain, result))
	}
	if code := login("right"); code != 0 {
		t.Fatalf("first login: error %d", code)
	}
	for range 2 {
		if code := login("wrong"); code != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("wrong password: error %d", code)
		}
	}
	if n := counted("failed"); n != 2 {
		t.Fatalf("%v checked failures counted, want 2", n)
	}
	if code := login("wrong"); code != kerr.SaslAuthenticationFailed.Code || counted("throttled") != 1 {
		t.Fatalf("third wrong password: error %d, %v throttled; want a throttled failure", code, counted("throttled"))
	}
	if code := login("right"); code != 0 {
		t.Fatalf("the right password, verified before, while alice is throttled: error %d", code)
	}
	addUser(t, tb, "alice", "new") // a new salt and keys
	if code := login("right"); code != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("the old password after a change: error %d", code)
	}
	if n := counted("throttled"); n != 2 {
		t.Fatalf("the old password after a change was not throttled (%v throttled): the cache outlived the change", n)
	}
}

// size is the number of buckets held.
func (fl *failureLimiter) size() int {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return len(fl.buckets)
}
