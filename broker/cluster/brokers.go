package cluster

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"millrace/broker/coord"
)

// clusterIDZnode is /cluster/id: {"version":"1","id":"<22 chars>"}, as Kafka
// writes it (the version is a string there).
type clusterIDZnode struct {
	Version string `json:"version"`
	ID      string `json:"id"`
}

// loadClusterID reads the cluster ID, generating it on first start. Two
// brokers starting together race on Create; the loser reads the winner's.
func loadClusterID(store coord.Store) (string, error) {
	for attempt := 0; attempt < 2; attempt++ {
		data, _, err := store.Get(clusterIDPath)
		if err == nil {
			var z clusterIDZnode
			if err := json.Unmarshal(data, &z); err != nil || z.ID == "" {
				return "", fmt.Errorf("cluster: %s holds %q, not a cluster ID", clusterIDPath, data)
			}
			return z.ID, nil
		}
		if !errors.Is(err, coord.ErrNoNode) {
			return "", fmt.Errorf("cluster: reading the cluster ID: %w", err)
		}
		id, err := newTopicID()
		if err != nil {
			return "", err
		}
		_, err = store.Create(clusterIDPath, mustJSON(clusterIDZnode{Version: "1", ID: TopicIDString(id)}), coord.Persistent)
		if err != nil && !errors.Is(err, coord.ErrNodeExists) {
			return "", fmt.Errorf("cluster: creating the cluster ID: %w", err)
		}
	}
	return "", fmt.Errorf("cluster: %s was created and deleted concurrently", clusterIDPath)
}

// registration keeps this broker's ephemeral node alive and the live-broker
// list current: one goroutine watches /brokers/ids, re-reads it on every
// change and re-creates our node after a session expiry.
type registration struct {
	c    *Cluster
	data []byte

	stopping chan struct{}
	done     chan struct{}
	once     sync.Once
}

// retryInterval is how long the broker watch waits after a store error.
const retryInterval = 500 * time.Millisecond

// Register publishes this broker at /brokers/ids/<id> (ephemeral) with one
// PLAINTEXT listener at host:port; see RegisterEndpoints.
func (c *Cluster) Register(host string, port int32, rack string) error {
	return c.RegisterEndpoints([]Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: port}}, rack)
}

// RegisterEndpoints publishes this broker at /brokers/ids/<id> (ephemeral)
// with the addresses clients should use, one per listener, the inter-broker
// listener's first; loads the live brokers and keeps both current until
// Close.
//
// A broker restarted right after a crash finds its ID still held by its
// previous life: ZooKeeper keeps that session's ephemerals until the session
// expires, up to the session timeout after its last heartbeat. So when
// another session holds the ID, Register waits for that node to go (watching
// it, and logging once) for up to registrationWait, then registers. Only an
// ID still held after that is refused, naming the address of the broker that
// holds it: another live broker was given the same broker.id.
func (c *Cluster) RegisterEndpoints(endpoints []Endpoint, rack string) error {
	if len(endpoints) == 0 {
		return errors.New("cluster: a broker registers at least one endpoint")
	}
	host, port := endpoints[0].Host, endpoints[0].Port
	reg := &registration{c: c, data: encodeBroker(endpoints, rack), stopping: make(chan struct{}), done: make(chan struct{})}
	if err := c.claimBrokerID(reg.data); err != nil {
		return err
	}
	watch, err := reg.refresh()
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed || c.registration != nil {
		c.mu.Unlock()
		return fmt.Errorf("cluster: Register after Close or twice: %w", ErrClosed)
	}
	c.registration = reg
	c.mu.Unlock()
	go reg.run(watch)
	c.logger.Info("broker registered", "broker_id", c.cfg.BrokerID, "host", host, "port", port)
	return nil
}

// registrationWait is how long Register waits for another session's hold on
// this broker's ID to end: the session timeout, plus half of it for the
// server to notice. ZooKeeper checks for expired sessions once per tick and
// grants a session timeout only when it is at least two ticks
// (minSessionTimeout), so half the timeout covers the tick by which the
// expiry may come late. A single broker (embedded coordination) does not
// wait: the sessions of its previous run died with it and their ephemerals
// were dropped when the store was opened, so a holder is alive in this
// process.
func (c *Cluster) registrationWait() time.Duration {
	if !c.cfg.Replicated {
		return 0
	}
	return c.cfg.SessionTimeout + c.cfg.SessionTimeout/2
}

// AwaitBrokerID waits, as Register does, until no other session holds this
// broker's ID, or fails as Register would. A broker calls it before binding
// its listener: while its previous run still holds the ID, the cluster
// still sends that run's clients and followers to this address, and a
// refused connection sends them to look elsewhere at once, where a listener
// nobody accepts on would leave them waiting on their timeouts.
func (c *Cluster) AwaitBrokerID() error { return c.claimBrokerID(nil) }

// claimBrokerID creates this broker's ephemeral registration with data,
// waiting for up to registrationWait while another session holds it (see
// Register). With nil data it only waits until the ID is free or ours.
func (c *Cluster) claimBrokerID(data []byte) error {
	path := brokerPath(c.cfg.BrokerID)
	var deadline *time.Timer
	expired := false
	for {
		if data != nil {
			_, err := c.store.Create(path, data, coord.Ephemeral)
			if err == nil {
				return nil
			}
			if !errors.Is(err, coord.ErrNodeExists) {
				return fmt.Errorf("cluster: registering broker %d: %w", c.cfg.BrokerID, err)
			}
		}
		held, stat, watch, err := c.store.GetW(path)
		if errors.Is(err, coord.ErrNoNode) {
			if data == nil {
				return nil
			}
			continue // the other session ended in between: create again
		}
		if err != nil {
			return fmt.Errorf("cluster: reading the registration of broker %d: %w", c.cfg.BrokerID, err)
		}
		if stat.EphemeralOwner == c.store.SessionID() {
			// Ours: a create whose reply was lost to a dropped connection.
			return nil
		}
		holder := holderAddress(held)
		if wait := c.registrationWait(); expired || wait == 0 {
			after := ""
			if wait > 0 {
				after = fmt.Sprintf(", still after waiting %v for a previous session to expire", wait)
			}
			return fmt.Errorf("cluster: broker id %d is already registered by another live broker at %s (session 0x%x)%s; give each broker its own broker.id: %w",
				c.cfg.BrokerID, holder, stat.EphemeralOwner, after, coord.ErrNodeExists)
		}
		if deadline == nil {
			deadline = time.NewTimer(c.registrationWait())
			defer deadline.Stop()
			// The model loaded at Open may name this broker leader of
			// partitions its previous run led; others lead them by the
			// time the wait ends. Lead nothing until Start has read the
			// model again under this registration.
			c.sessionOK.Store(false)
			c.poke()
			c.logger.Warn("broker id held by another session, likely this broker's previous run; waiting for that session to expire",
				"broker_id", c.cfg.BrokerID, "held_by", holder, "session", fmt.Sprintf("0x%x", stat.EphemeralOwner), "max_wait", c.registrationWait())
		}
		// The watch fires on deletion (the session expired), on a data
		// change, or with EventNotWatching if our own session ended; each
		// is a reason to try again.
		select {
		case <-watch:
		case <-deadline.C:
			expired = true
		}
	}
}

// holderAddress names the broker a registration belongs to, host:port from
// its data.
func holderAddress(data []byte) string {
	var z brokerZnode
	if err := json.Unmarshal(data, &z); err != nil || z.Host == "" {
		// Quote the start only: the data is anyone's who can write there.
		return fmt.Sprintf("an unreadable registration (%q)", data[:min(len(data), 64)])
	}
	return net.JoinHostPort(z.Host, strconv.Itoa(int(z.Port)))
}

// refresh re-reads /brokers/ids, arming a watch, and re-creates our node if
// a session expiry removed it.
func (r *registration) refresh() (<-chan coord.Event, error) {
	c := r.c
	ids, watch, err := c.store.ChildrenW(brokerIDsPath)
	if err != nil {
		return nil, fmt.Errorf("cluster: watching %s: %w", brokerIDsPath, err)
	}
	own := strconv.Itoa(int(c.cfg.BrokerID))
	brokers := make([]BrokerInfo, 0, len(ids))
	registered := false
	for _, name := range ids {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			continue // not a broker registration
		}
		data, _, err := c.store.Get(brokerPath(int32(id)))
		if errors.Is(err, coord.ErrNoNode) {
			continue // went away between Children and Get; the watch fires
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: reading broker %d: %w", id, err)
		}
		info, err := decodeBroker(int32(id), data)
		if err != nil {
			c.logger.Warn("ignoring an unreadable broker registration", "broker_id", id, "err", err)
			continue
		}
		brokers = append(brokers, info)
		registered = registered || name == own
	}
	if !registered {
		// Our session expired and took the ephemeral with it; the backend
		// has a new session, so register again. The watch fires for it.
		if _, err := c.store.Create(brokerPath(c.cfg.BrokerID), r.data, coord.Ephemeral); err != nil && !errors.Is(err, coord.ErrNodeExists) {
			return nil, fmt.Errorf("cluster: re-registering broker %d: %w", c.cfg.BrokerID, err)
		}
		c.logger.Info("broker re-registered", "broker_id", c.cfg.BrokerID)
	}
	// Children sorts names, and "10" sorts before "9": order by ID.
	slices.SortFunc(brokers, func(a, b BrokerInfo) int { return cmp.Compare(a.ID, b.ID) })
	c.mu.Lock()
	c.brokers = brokers
	c.brokerGen++
	c.signalModelLocked()
	c.mu.Unlock()
	c.poke()
	return watch, nil
}

func (r *registration) run(watch <-chan coord.Event) {
	defer close(r.done)
	for {
		if watch != nil {
			select {
			case <-r.stopping:
				return
			case <-watch:
			}
		}
		var err error
		if watch, err = r.refresh(); err != nil {
			r.c.logger.Warn("broker list refresh failed; retrying", "err", err)
			select {
			case <-r.stopping:
				return
			case <-time.After(retryInterval):
			}
		}
	}
}

// stop ends the watch goroutine and deletes our registration, so the other
// brokers see us leave at once rather than at session expiry.
func (r *registration) stop() error {
	r.once.Do(func() { close(r.stopping) })
	<-r.done
	err := r.c.store.Delete(brokerPath(r.c.cfg.BrokerID), coord.AnyVersion)
	if err != nil && !errors.Is(err, coord.ErrNoNode) && !errors.Is(err, coord.ErrClosed) {
		return fmt.Errorf("cluster: deregistering broker %d: %w", r.c.cfg.BrokerID, err)
	}
	return nil
}
