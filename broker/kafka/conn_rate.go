package kafka

// Connection creation rates (KIP-612): max.connection.creation.rate per
// listener, and millrace.max.connection.creation.rate.per.ip per IP address
// (Kafka sets the latter as the connection_creation_rate quota of an IP
// entity). Over either, new connections are slowed, not refused, as Kafka
// does:
//
//   - per listener, the listener's accept loop waits before it hands the
//     connection on, so further connections wait in the kernel's accept
//     backlog: a reconnect storm is spread out instead of burning CPU on
//     TLS handshakes and SASL;
//   - per IP, the connection's own goroutine waits before its first read,
//     so one address reconnecting in a loop is slowed without holding up
//     the others on its listener.
//
// Both rates are paced by GCRA (the generic cell rate algorithm): a burst
// of one second's worth of connections goes through at once, and beyond it
// one connection per 1/rate. Rates at or above connectionRateUnbounded
// (Kafka's default is 2^31-1) are not paced at all.

import (
	"time"
)

// connectionRateUnbounded is the rate from which connections are not
// paced: a nanosecond between connections.
const connectionRateUnbounded = int(time.Second)

// pacer is one GCRA state: tat, the theoretical arrival time of the next
// connection when the rate has been kept exactly.
type pacer struct{ tat time.Time }

// reserve admits one connection arriving at now under rate per second and
// returns how long it must wait first.
func (p *pacer) reserve(now time.Time, rate int) time.Duration {
	if rate >= connectionRateUnbounded {
		return 0
	}
	interval := time.Second / time.Duration(rate)
	tolerance := time.Second - interval // a burst of rate connections
	at := now
	if earliest := p.tat.Add(-tolerance); earliest.After(at) {
		at = earliest
	}
	if p.tat.Before(at) {
		p.tat = at
	}
	p.tat = p.tat.Add(interval)
	return at.Sub(now)
}

// connectionDelayPerIP is how long a new connection from ip must wait
// under millrace.max.connection.creation.rate.per.ip. The paced addresses
// are forgotten once their pace is back to idle, so the map holds only
// addresses that connected within about the last second.
func (a *admission) connectionDelayPerIP(cfg *Config, ip string, now time.Time) time.Duration {
	rate := cfg.MaxConnectionCreationRatePerIP
	if rate >= connectionRateUnbounded {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.creation == nil {
		a.creation = make(map[string]*pacer)
	}
	if len(a.creation) >= a.sweepAt {
		for addr, p := range a.creation {
			if !p.tat.After(now) {
				delete(a.creation, addr)
			}
		}
		a.sweepAt = max(64, 2*len(a.creation))
	}
	p := a.creation[ip]
	if p == nil {
		p = &pacer{}
		a.creation[ip] = p
	}
	return p.reserve(now, rate)
}

// waitOrClose waits d, or less when the broker closes first: it reports
// whether the wait ran to its end.
func (b *Broker) waitOrClose(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-b.ctx.Done():
		return false
	}
}
