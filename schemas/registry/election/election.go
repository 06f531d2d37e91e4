// Package election elects the schema registry's primary on the
// coordination store (broker/coord.Store: the embedded store under `millrace
// up`, ZooKeeper in a cluster): the registry that creates the ephemeral node
// Path, holding its URL, is primary until its session ends; the others
// watch the node, learn the primary's URL from it to forward writes to,
// and try again when it goes.
//
// Why the store and not Kafka's group coordination, which Confluent's
// registry and Karapace use (a JoinGroup whose leader assignment names the
// primary): every broker that hosts a registry already holds a session on
// the store, which gives ephemeral nodes and watches, and the controller
// election (broker/cluster/controller.go) is this same pattern; a group
// would add a protocol, heartbeats and rebalances for one bit of state.
//
// The election only routes writes; it is not what keeps them safe. A
// primary that was cut off from the store may believe it leads for up to a
// session timeout after its node is gone. Safety comes from the log: the
// winner calls Config.Claim before Primary reports it primary, and Claim
// (kafkalog.Log.Claim) initialises the shared transactional producer, which
// fences the old primary's writes. The old one learns it through Fenced
// (its Append failed) or its watch, and steps down. The others see the
// winner's URL from the moment it creates the node, so a write forwarded to
// it during its claim (a few round trips) is refused as not yet primary and
// is retried by the client, as during any failover.
package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"millrace/broker/coord"
)

// DefaultPath is the primary's node.
const DefaultPath = "/millrace/schema_registry/primary"

// Defaults of Config.
const (
	DefaultRetryInterval = time.Second
	DefaultClaimTimeout  = 30 * time.Second
)

// Config is one registry's candidacy.
type Config struct {
	// Store is the coordination session; the node is ephemeral in it.
	// Required.
	Store coord.Store
	// Path is the primary's node. Default DefaultPath.
	Path string
	// URL is where this registry serves, told to the others when it is
	// primary. Required.
	URL string
	// Claim is called once this registry won, before Primary reports it:
	// it makes this process the log's writer, fencing the previous one.
	// When it fails the node is given up and the election tried again
	// after RetryInterval. Required.
	Claim func(context.Context) error
	// Release is called when this registry stops being primary. Optional.
	Release func()
	// RetryInterval is the pause after a failure. Default
	// DefaultRetryInterval.
	RetryInterval time.Duration
	// ClaimTimeout bounds one Claim. Default DefaultClaimTimeout.
	ClaimTimeout time.Duration
	// Logger receives the election's lines. Default: discarded.
	Logger *slog.Logger
}

// node is the content of Path: {"version":1,"url":"http://host:8081"}.
type node struct {
	Version int    `json:"version"`
	URL     string `json:"url"`
}

// Election is one registry's view of who is primary (registry.Election).
type Election struct {
	cfg    Config
	logger *slog.Logger
	fenced chan struct{} // kicked by Fenced

	mu   sync.Mutex // guards the following
	self bool
	url  string
}

// New returns the candidacy; Run campaigns.
func New(cfg Config) (*Election, error) {
	if cfg.Store == nil || cfg.URL == "" || cfg.Claim == nil {
		return nil, errors.New("election: Store, URL and Claim are required")
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if err := coord.ValidatePath(cfg.Path); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.ClaimTimeout <= 0 {
		cfg.ClaimTimeout = DefaultClaimTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Election{cfg: cfg, logger: logger.With("component", "schema-registry-election"), fenced: make(chan struct{}, 1)}, nil
}

// Primary reports whether this registry is primary now and, when it is
// not, the primary's URL ("" while there is none).
func (e *Election) Primary() (self bool, url string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.self {
		return true, ""
	}
	return false, e.url
}

// Fenced tells the election that this process's writes were fenced:
// another process claimed the log, so this one steps down and campaigns
// again. Safe to call from any goroutine; it does not wait.
func (e *Election) Fenced() {
	select {
	case e.fenced <- struct{}{}:
	default:
	}
}

func (e *Election) set(self bool, url string) {
	e.mu.Lock()
	was := e.self
	e.self, e.url = self, url
	e.mu.Unlock()
	if was && !self && e.cfg.Release != nil {
		e.cfg.Release()
	}
}

// Run campaigns until ctx is done or the store is closed, then steps down,
// deleting the node when this registry holds it.
func (e *Election) Run(ctx context.Context) error {
	defer e.resign()
	for ctx.Err() == nil {
		wait, err := e.round(ctx)
		if errors.Is(err, coord.ErrClosed) {
			return nil
		}
		if err != nil {
			e.set(false, "")
			e.logger.Warn("schema registry election; retrying", "err", err, "retry_in", e.cfg.RetryInterval)
			wait = time.After(e.cfg.RetryInterval)
		}
		select {
		case <-ctx.Done():
		case <-wait:
		}
	}
	return nil
}

// round is one turn: create the node or learn who holds it, and return
// what to wait for before the next turn. While this registry leads, round
// itself waits until it no longer does.
func (e *Election) round(ctx context.Context) (<-chan time.Time, error) {
	if err := coord.EnsurePath(e.cfg.Store, coord.ParentPath(e.cfg.Path)); err != nil {
		return nil, err
	}
	data, err := json.Marshal(node{Version: 1, URL: e.cfg.URL})
	if err != nil {
		return nil, err
	}
	_, err = e.cfg.Store.Create(e.cfg.Path, data, coord.Ephemeral)
	if err != nil && !errors.Is(err, coord.ErrNodeExists) {
		return nil, err
	}
	if errors.Is(err, coord.ErrNodeExists) {
		current, stat, watch, err := e.cfg.Store.GetW(e.cfg.Path)
		if errors.Is(err, coord.ErrNoNode) {
			return closedTimer(), nil // gone meanwhile: try at once
		}
		if err != nil {
			return nil, err
		}
		if stat.EphemeralOwner != e.cfg.Store.SessionID() {
			var n node
			if err := json.Unmarshal(current, &n); err != nil {
				e.logger.Warn("unreadable schema registry primary node", "path", e.cfg.Path, "data", string(current))
			}
			e.set(false, forwardURL(n, e.cfg.URL))
			return e.follow(ctx, watch), nil
		}
		// The node is this session's: a turn that lost its claim left it,
		// or the session outlived a step-down. Lead from it.
	}
	return e.lead(ctx)
}

// forwardURL is where a registry at own forwards writes while the node
// another session holds says n: its URL, except this registry's own. That
// is its node from a session that has not expired yet (a restart right
// after a crash): nobody serves there as primary, and forwarding would
// send writes to this registry itself.
func forwardURL(n node, own string) string {
	if n.URL == own {
		return ""
	}
	return n.URL
}

// follow waits for the primary's node to change or go.
func (e *Election) follow(ctx context.Context, watch <-chan coord.Event) <-chan time.Time {
	select {
	case <-ctx.Done():
	case <-watch:
	case <-e.fenced: // stale: this registry is not primary
	}
	return closedTimer()
}

// lead claims the log and then leads until the node goes, the session
// ends, the log reports this process fenced, or ctx is done.
func (e *Election) lead(ctx context.Context) (<-chan time.Time, error) {
	drainKick(e.fenced) // a fencing before this claim is not about it
	claimCtx, cancel := context.WithTimeout(ctx, e.cfg.ClaimTimeout)
	err := e.cfg.Claim(claimCtx)
	cancel()
	if err != nil {
		e.giveUp()
		return nil, fmt.Errorf("claiming the schema registry's log: %w", err)
	}
	e.set(true, "")
	e.logger.Info("this schema registry is primary", "url", e.cfg.URL)
	for {
		_, stat, watch, err := e.cfg.Store.GetW(e.cfg.Path)
		if err == nil && stat.EphemeralOwner != e.cfg.Store.SessionID() {
			err = errors.New("the primary node belongs to another session")
		}
		if err != nil {
			e.set(false, "")
			e.logger.Warn("no longer the schema registry's primary", "why", err)
			if errors.Is(err, coord.ErrNoNode) {
				return closedTimer(), nil
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return closedTimer(), nil
		case <-watch: // re-read: a data change or a reconnect keeps the lead
		case <-e.fenced:
			e.set(false, "")
			e.logger.Warn("no longer the schema registry's primary: another process claimed the log")
			e.giveUp()
			return time.After(e.cfg.RetryInterval), nil
		}
	}
}

// giveUp deletes the node when this session holds it, so another registry
// can lead.
func (e *Election) giveUp() {
	_, stat, err := e.cfg.Store.Get(e.cfg.Path)
	if err == nil && stat.EphemeralOwner == e.cfg.Store.SessionID() {
		if err := e.cfg.Store.Delete(e.cfg.Path, stat.Version); err != nil && !errors.Is(err, coord.ErrNoNode) {
			e.logger.Warn("giving up the schema registry's primary node", "err", err)
		}
	}
}

// resign steps down at the end of Run.
func (e *Election) resign() {
	e.set(false, "")
	e.giveUp()
}

func closedTimer() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}

func drainKick(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}
