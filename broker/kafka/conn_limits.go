package kafka

// Limits on what clients can make the broker hold, checked at the edge
// before anything is allocated for a connection or a request:
//
//   - max.connections and max.connections.per.ip (with Kafka's
//     max.connections.per.ip.overrides): a connection over either is closed
//     as soon as it is accepted. Refusals are counted
//     (millrace_broker_connections_refused_total) and logged at most once
//     per refusalLogInterval, with the number refused since the last line,
//     so a flood does not flood the log too.
//   - max.connection.creation.rate and its per-IP counterpart slow new
//     connections down instead of refusing them (KIP-612, conn_rate.go).
//   - queued.max.request.bytes: a broker-wide budget of request bytes read
//     and not yet answered (requestBudget). The reader of a connection takes
//     budget before it reads (and allocates) the next part of a frame, and
//     gives it back when the request's response is written. A reader that
//     cannot get budget waits, so the socket is not read and TCP pushes
//     back on the client.
//
// A Produce frame takes budget a chunk at a time as it arrives, not for the
// whole announced size at once: a client that sends a size prefix and
// nothing else then holds frameClassMin bytes of budget, not
// socket.request.max.bytes, and cannot stall everyone else's reading.
// Other requests (at most millrace.control.request.max.bytes) take their
// whole charge at once, holding nothing while they wait. Readers that
// hold budget go first; one that holds some waits at most
// millrace.request.read.timeout.ms and is then closed, which frees it, so
// readers can never wait on each other for good. A reader holding none
// waits as long as it takes.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// requestDecodeFactor is what a request is charged against
// queued.max.request.bytes per byte that kmsg decodes into structs: up to
// about this many bytes are allocated per such byte. Measured with kmsg
// v1.15: an array of empty topic names in Metadata v0 decodes to 24 bytes
// per frame byte (a struct and a string header for every 2 bytes), an
// array whose elements each carry one empty tagged field (flexible
// versions) to 96 (a map per 4 bytes). Real requests are small, so the
// charge is too. In a Produce request only the bytes besides its record
// batches count (produce_structure.go): the batches are kept as they are.
const requestDecodeFactor = 100

// refusalLogInterval is the least time between two log lines about
// refused connections.
const refusalLogInterval = 10 * time.Second

// admission counts open connections, in total and per IP address.
type admission struct {
	mu    sync.Mutex // guards the following
	total int
	perIP map[string]int
	// refusedSinceLog counts refusals not yet logged; lastLog is when the
	// last refusal line was written.
	refusedSinceLog int
	lastLog         time.Time
	// creation paces new connections per IP address (conn_rate.go);
	// addresses back at an idle pace are swept out once it holds sweepAt.
	creation map[string]*pacer
	sweepAt  int
}

// remoteIP is the connection's peer address without the port.
func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// admit counts a new connection from ip, or returns the setting that
// refuses it.
func (a *admission) admit(cfg *Config, ip string) (refusedBy string) {
	limit := cfg.MaxConnectionsPerIP
	if n, ok := cfg.MaxConnectionsPerIPOverrides[ip]; ok {
		limit = n
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.total >= cfg.MaxConnections:
		return "max.connections"
	case a.perIP[ip] >= limit:
		return "max.connections.per.ip"
	}
	if a.perIP == nil {
		a.perIP = make(map[string]int)
	}
	a.total++
	a.perIP[ip]++
	return ""
}

// release uncounts a connection from ip that admit counted.
func (a *admission) release(ip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total--
	if a.perIP[ip]--; a.perIP[ip] <= 0 {
		delete(a.perIP, ip)
	}
}

// open is the number of connections counted.
func (a *admission) open() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total
}

// refused records a refused connection and reports how many refusals to
// log now, 0 to log nothing (one line per refusalLogInterval).
func (a *admission) refused(now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refusedSinceLog++
	if now.Sub(a.lastLog) < refusalLogInterval {
		return 0
	}
	n := a.refusedSinceLog
	a.refusedSinceLog, a.lastLog = 0, now
	return n
}

// refuse closes a connection over a limit, counting and (rate-limited)
// logging it first, so that whoever sees the connection closed finds the
// refusal counted and logged.
func (b *Broker) refuse(nc net.Conn, ip, refusedBy string) {
	b.metrics.connectionRefused(refusedBy)
	if n := b.admission.refused(time.Now()); n > 0 {
		b.logger.Warn("refusing connections over a limit", "limit", refusedBy, "remote_ip", ip,
			"refused_since_last_line", n, "max_connections", b.cfg.MaxConnections, "max_connections_per_ip", b.cfg.MaxConnectionsPerIP)
	}
	nc.Close()
}

// requestBudget is queued.max.request.bytes; see the top of this file.
// Readers that already hold budget (in the middle of a frame, or about to
// decode one) go before readers that hold none: otherwise a reader waiting
// to start a frame could stand in front of one that needs a little more
// to finish its frame and free everything it holds. A semaphore that
// serves waiters in arrival order would deadlock them until the frame
// deadline.
type requestBudget struct {
	size int64 // -1: unbounded
	used atomic.Int64

	mu sync.Mutex // guards the following
	// holdersWaiting counts waiting readers that hold budget; while there
	// are any, readers holding none wait.
	holdersWaiting int
	// waiting counts all waiting readers: with none, a release has no one
	// to wake and leaves released as it is (it is given back once per
	// request, so a channel made per release was garbage per request).
	waiting int
	// released is closed, and replaced, whenever budget is given back
	// while readers wait.
	released chan struct{}
}

func newRequestBudget(size int64) *requestBudget {
	return &requestBudget{size: max(size, -1), released: make(chan struct{})}
}

// errBudgetWait is a reader that held budget and waited too long for more.
var errBudgetWait = errors.New("waited too long for request byte budget")

// acquire takes n bytes of budget. A caller holding none waits until ctx
// is done; one holding some (holding) waits at most maxWait, so that
// readers cannot wait on each other for good.
func (rb *requestBudget) acquire(ctx context.Context, n int64, holding bool, maxWait time.Duration) error {
	if rb.size < 0 || n <= 0 {
		return nil
	}
	// The timer is armed at the first wait: nearly every acquire finds
	// budget free and would only have allocated it.
	var timeout <-chan time.Time
	rb.mu.Lock()
	for {
		if rb.used.Load()+n <= rb.size && (holding || rb.holdersWaiting == 0) {
			rb.used.Add(n)
			rb.mu.Unlock()
			return nil
		}
		if holding {
			rb.holdersWaiting++
			if timeout == nil {
				t := time.NewTimer(maxWait)
				defer t.Stop()
				timeout = t.C
			}
		}
		rb.waiting++
		released := rb.released
		rb.mu.Unlock()
		var err error
		select {
		case <-released:
		case <-ctx.Done():
			err = ctx.Err()
		case <-timeout:
			err = fmt.Errorf("%w (%v; queued.max.request.bytes %d)", errBudgetWait, maxWait, rb.size)
		}
		rb.mu.Lock()
		rb.waiting--
		if holding {
			rb.holdersWaiting--
		}
		if err != nil {
			rb.mu.Unlock()
			rb.wake() // a reader holding none may go now
			return err
		}
	}
}

// release gives back n bytes taken by acquire.
func (rb *requestBudget) release(n int64) {
	if rb.size < 0 || n <= 0 {
		return
	}
	rb.used.Add(-n)
	rb.wake()
}

// wake lets every waiting reader look at the budget again.
func (rb *requestBudget) wake() {
	rb.mu.Lock()
	// A reader that finds too little budget counts itself in waiting in
	// the same critical section, after this release's bytes were given
	// back: with none counted here, no reader can miss them.
	if rb.waiting > 0 {
		close(rb.released)
		rb.released = make(chan struct{})
	}
	rb.mu.Unlock()
}

// decodeCharge is the budget to take, besides the taken bytes of the frame
// already read, for decoding decoded of them: requestDecodeFactor times,
// all told at most the whole budget, so that every request can still be
// served.
func (rb *requestBudget) decodeCharge(decoded, taken int64) int64 {
	if rb.size < 0 {
		return 0
	}
	return max(min(taken+decoded*(requestDecodeFactor-1), rb.size)-taken, 0)
}
