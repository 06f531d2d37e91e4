package kafka

// Connection creation rates (KIP-612): max.connection.creation.rate per
// listener, and per IP address the connection_creation_rate quota of an
// ip entity (broker/quota: /config/ips/<ip>, else /config/ips/<default>,
// set with AlterClientQuotas or `millrace quota set --ip`). Over either,
// new connections are slowed, not refused:
//
//   - per listener, the listener's accept loop waits before it hands the
//     connection on, so further connections wait in the kernel's accept
//     backlog: a reconnect storm is spread out instead of burning CPU on
//     TLS handshakes and SASL. Kafka's acceptor blocks the same way;
//   - per IP, the connection's own goroutine waits before its first read,
//     so one address reconnecting in a loop is slowed without holding up
//     the others on its listener, and the connection is then served.
//     Kafka's acceptor, instead, neither serves nor counts a connection
//     over its IP's rate: it holds it unread for the throttle time (at
//     most one quota window, a second) and then closes it, and the client
//     reconnects (ConnectionQuotas.recordIpConnectionMaybeThrottle,
//     Acceptor's throttledSockets). Both serve an address at most its
//     rate; serving late spares the client a reconnect and an error in
//     its log, and max.connections.per.ip bounds the connections held
//     waiting. A rate of 0 serves nothing: each connection is held a
//     second, as Kafka holds it, and closed.
//
// Both rates are paced by GCRA (the generic cell rate algorithm): a burst
// of one second's worth of connections goes through at once, and beyond it
// one connection per 1/rate. Rates at or above connectionRateUnbounded
// (Kafka's default is 2^31-1) are not paced at all.

import (
	"time"

	"millrace/broker/quota"
)

// connectionRates is what Config.Quotas offers when it holds IP quotas
// (quota.Manager): the connection_creation_rate applying to an address.
type connectionRates interface {
	ConnectionCreationRate(ip string) (rate int, ok bool)
}

// blockedHold is how long a connection from an address whose rate is 0
// is held before it is closed: Kafka's longest connection throttle, one
// quota window.
const blockedHold = quota.WindowSize

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
// under its connection_creation_rate quota, and whether it is served
// after the wait (not when the rate is 0). An address with no quota,
// neither its own nor the default's, costs one lookup and no state. The
// paced addresses are forgotten once their pace is back to idle, so the
// map holds only addresses that connected within about the last second.
func (a *admission) connectionDelayPerIP(rates connectionRates, ip string, now time.Time) (wait time.Duration, serve bool) {
	if rates == nil {
		return 0, true
	}
	rate, ok := rates.ConnectionCreationRate(ip)
	switch {
	case !ok || rate >= connectionRateUnbounded:
		return 0, true
	case rate <= 0:
		return blockedHold, false
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
	return p.reserve(now, rate), true
}

// ipRates is the broker's IP quotas, nil when its Config.Quotas has none.
func (b *Broker) ipRates() connectionRates {
	rates, _ := b.cfg.Quotas.(connectionRates)
	return rates
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
