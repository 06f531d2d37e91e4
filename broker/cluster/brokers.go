package cluster

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
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

// Register publishes this broker at /brokers/ids/<id> (ephemeral) with the
// address clients should use, loads the live brokers and keeps both current
// until Close. It fails if another live session holds the broker ID.
func (c *Cluster) Register(host string, port int32, rack string) error {
	z := brokerZnode{Version: 4, Host: host, Port: port}
	if rack != "" {
		z.Rack = &rack
	}
	reg := &registration{c: c, data: mustJSON(z), stopping: make(chan struct{}), done: make(chan struct{})}
	if _, err := c.store.Create(brokerPath(c.cfg.BrokerID), reg.data, coord.Ephemeral); err != nil {
		if errors.Is(err, coord.ErrNodeExists) {
			return fmt.Errorf("cluster: broker id %d is already registered by another live broker: %w", c.cfg.BrokerID, err)
		}
		return fmt.Errorf("cluster: registering broker %d: %w", c.cfg.BrokerID, err)
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
		var z brokerZnode
		if err := json.Unmarshal(data, &z); err != nil {
			c.logger.Warn("ignoring an unreadable broker registration", "broker_id", id, "err", err)
			continue
		}
		info := BrokerInfo{ID: int32(id), Host: z.Host, Port: z.Port}
		if z.Rack != nil {
			info.Rack = *z.Rack
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
