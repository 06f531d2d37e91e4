package ship

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A record that fails for a reason only its operator can fix (the topic is
// missing, the agent may not write to it) is retried forever by a tailer and
// refused by the beacon, so nothing ships and, without this file, the only
// trace is the errors counter. The Shipper recognises those reasons, logs
// what is wrong and what to do (the first time at once, then at most once
// per problemLogEvery for the same topic and cause), counts the problem in
// millrace_ship_problem, and reports it through Ready and Problems until a
// record to that topic is acknowledged again.

// problemLogEvery is the least time between two log lines about the same
// problem.
const problemLogEvery = time.Minute

// problemExpiry is how long a problem stays reported after its last failed
// record when no record to its topic is tried since: nothing is failing
// then, and nothing is known to work either.
const problemExpiry = 2 * time.Minute

// Cause is a reason records to a topic cannot ship that the operator must
// fix; it is the "cause" label of millrace_ship_problem.
type Cause string

// The causes the Shipper recognises.
const (
	CauseTopicMissing  Cause = "topic_missing"  // UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID
	CauseInvalidTopic  Cause = "invalid_topic"  // INVALID_TOPIC_EXCEPTION
	CauseTopicDenied   Cause = "topic_denied"   // TOPIC_AUTHORIZATION_FAILED
	CauseClusterDenied Cause = "cluster_denied" // CLUSTER_AUTHORIZATION_FAILED
	CauseAuthFailed    Cause = "auth_failed"    // SASL_AUTHENTICATION_FAILED
)

// Problem is a reason records to a topic do not ship, with what to do.
type Problem struct {
	Topic string `json:"topic"`
	Cause Cause  `json:"cause"`
	// Message says what is wrong and what to do, in one sentence.
	Message string `json:"message"`
	// Since is the first failure, Last the latest; Failed counts the
	// records that failed for this cause since Since.
	Since  time.Time `json:"since"`
	Last   time.Time `json:"last"`
	Failed int64     `json:"failed"`
}

// causeOf is the operator-fixable cause of a produce error, or "".
func causeOf(err error) Cause {
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return CauseTopicMissing
	case errors.Is(err, kerr.InvalidTopicException):
		return CauseInvalidTopic
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return CauseTopicDenied
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return CauseClusterDenied
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return CauseAuthFailed
	}
	return ""
}

// explain says what is wrong and what to do, for this shipper's settings.
func (c Config) explain(cause Cause, topic string) string {
	principal := "User:<agent user>"
	if c.Security.SASL != nil && c.Security.SASL.Username != "" {
		principal = "User:" + c.Security.SASL.Username
	}
	switch cause {
	case CauseTopicMissing:
		if c.AutoCreateTopics != nil && !*c.AutoCreateTopics {
			return fmt.Sprintf(`topic %s does not exist: run "millrace topic create %s" (this agent's auto_create_topics is false, so it never asks the broker to create it)`, topic, topic)
		}
		return fmt.Sprintf(`topic %s does not exist and the broker does not create topics on first use: run "millrace topic create %s", or allow auto-creation (auto.create.topics.enable=true; under millrace up it is off, turn it on in broker.settings)`, topic, topic)
	case CauseInvalidTopic:
		return fmt.Sprintf(`topic name %q is not valid: use at most 249 of the characters a-z A-Z 0-9 . _ - (not "." or "..")`, topic)
	case CauseTopicDenied:
		return fmt.Sprintf(`not authorized to write to topic %s: allow it with "millrace acl add --allow-principal %s --operation Write --topic %s" (Describe too, and Create to auto-create it)`, topic, principal, topic)
	case CauseClusterDenied:
		return fmt.Sprintf(`not authorized on the cluster (idempotent writes need IdempotentWrite): allow it with "millrace acl add --allow-principal %s --operation IdempotentWrite --cluster", or set disable_idempotence: true`, principal)
	case CauseAuthFailed:
		return "the broker refused this agent's credentials (SASL authentication failed): check sasl: mechanism, username and password (or password_file) against the broker's users"
	}
	return string(cause)
}

// problemKey names a problem.
type problemKey struct {
	topic string
	cause Cause
}

// problem is one problem's state.
type problem struct {
	Problem
	resolved bool      // a record to its topic was acknowledged since
	logged   time.Time // the last log line about it
	unlogged int64     // records failed since that line
}

// problems tracks the operator-fixable failures by topic and cause.
type problems struct {
	cfg    Config
	logger *slog.Logger
	active atomic.Int32 // unresolved problems, so that acknowledgements cost nothing while there are none
	// failing is a copy of topics, replaced whole on every change: an
	// acknowledgement for a topic without problems (every one but a few)
	// reads it without the lock.
	failing atomic.Pointer[map[string]int]
	desc    *prometheus.Desc

	mu     sync.Mutex // guards the following
	byKey  map[problemKey]*problem
	topics map[string]int // unresolved problems per topic
}

func newProblems(cfg Config, logger *slog.Logger) *problems {
	return &problems{
		cfg: cfg, logger: logger,
		desc: prometheus.NewDesc("millrace_ship_problem",
			"1 while records to topic fail for cause (topic_missing, invalid_topic, topic_denied, cluster_denied, auth_failed), 0 once one was acknowledged again; message says what to do.",
			[]string{"topic", "cause", "message"}, nil),
		byKey: make(map[problemKey]*problem), topics: make(map[string]int),
	}
}

// failed notes a failed record; it reports whether err is an
// operator-fixable problem.
func (p *problems) failed(topic string, err error, now time.Time) bool {
	cause := causeOf(err)
	if cause == "" {
		return false
	}
	if cause == CauseClusterDenied || cause == CauseAuthFailed {
		// Not the topic's fault: every topic fails the same way.
		topic = ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := problemKey{topic, cause}
	pr := p.byKey[k]
	if pr == nil {
		pr = &problem{Problem: Problem{Topic: topic, Cause: cause, Message: p.cfg.explain(cause, topic)}, resolved: true}
		p.byKey[k] = pr
	}
	if pr.resolved || now.Sub(pr.Last) > problemExpiry {
		if pr.resolved {
			p.active.Add(1)
			p.topics[topic]++
			p.publishLocked()
		}
		pr.resolved, pr.Since, pr.Failed, pr.logged, pr.unlogged = false, now, 0, time.Time{}, 0
	}
	pr.Last = now
	pr.Failed++
	pr.unlogged++
	if now.Sub(pr.logged) >= problemLogEvery {
		p.logger.Error(pr.Message, "topic", topic, "cause", string(cause), "failed_records", pr.unlogged, "err", err)
		pr.logged, pr.unlogged = now, 0
	}
	return true
}

// acknowledged notes that a record to topic was acknowledged: the topic's
// problems, and those of every topic, are over.
func (p *problems) acknowledged(topic string) {
	if p.active.Load() == 0 {
		return
	}
	if failing := p.failing.Load(); failing != nil && (*failing)[topic] == 0 && (*failing)[""] == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.publishLocked()
	for _, t := range []string{topic, ""} {
		if p.topics[t] == 0 {
			continue
		}
		for k, pr := range p.byKey {
			if k.topic != t || pr.resolved {
				continue
			}
			pr.resolved = true
			p.active.Add(-1)
			p.topics[t]--
			p.logger.Info("records ship again", "topic", topic, "cause", string(k.cause), "after", time.Since(pr.Since).Round(time.Second))
		}
	}
}

// publishLocked replaces failing with a copy of topics.
func (p *problems) publishLocked() {
	failing := make(map[string]int, len(p.topics))
	for t, n := range p.topics {
		if n > 0 {
			failing[t] = n
		}
	}
	p.failing.Store(&failing)
}

// current lists the unresolved problems of the named topics (every topic
// when none is named) whose last failure is recent, oldest first.
func (p *problems) current(now time.Time, topics ...string) []Problem {
	if p.active.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Problem
	for k, pr := range p.byKey {
		if pr.resolved || now.Sub(pr.Last) > problemExpiry {
			continue
		}
		if len(topics) > 0 && k.topic != "" && !slices.Contains(topics, k.topic) {
			continue
		}
		out = append(out, pr.Problem)
	}
	slices.SortFunc(out, func(a, b Problem) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Cause, b.Cause))
	})
	return out
}

// Describe implements prometheus.Collector.
func (p *problems) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

// Collect implements prometheus.Collector: every problem seen, 1 while it
// lasts and 0 once over, so a follower of the ops topic sees it end.
func (p *problems) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pr := range p.byKey {
		v := 0.0
		if !pr.resolved && now.Sub(pr.Last) <= problemExpiry {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, v, k.topic, string(k.cause), pr.Message)
	}
}
