package txn

import (
	"time"

	"millrace/broker/coord"
)

// loop runs a pass over the stored transactions at start, every
// AbortCheckInterval, and soon after ownership may have changed (a broker
// came or went: this broker may have taken IDs over).
func (c *Coordinator) loop() {
	defer c.wg.Done()
	check := time.NewTicker(c.cfg.AbortCheckInterval)
	defer check.Stop()
	owners := time.NewTicker(ownershipCheck)
	defer owners.Stop()
	seen := c.generation()
	c.pass()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-check.C:
		case <-owners.C:
			gen := c.generation()
			if gen == seen {
				continue
			}
			seen = gen
		}
		c.pass()
	}
}

// generation is the ownership view's generation (0 without Owner).
func (c *Coordinator) generation() uint64 {
	if c.cfg.Owner == nil {
		return 0
	}
	_, gen := c.cfg.Owner("")
	return gen
}

// pass looks at every transactional ID this broker coordinates: a decided
// transaction gets its markers written (a previous coordinator may have
// stopped before), an ongoing one past its timeout is aborted under a
// bumped epoch (Kafka's abortTimedOutTransactions), and an idle ID past
// transactional.id.expiration.ms is removed.
//
// The pass also counts the IDs this broker coordinates, by principal, for
// MaxIDs and MaxIDsPerPrincipal: an ID it did not see (removed, or now
// coordinated by another broker) stops counting once the pass completes.
func (c *Coordinator) pass() {
	seq, gen := c.index.beginPass(), c.generation()
	names, err := c.store.Children(transactionsRoot)
	if err != nil {
		c.log.Warn("listing transactions", "err", err)
		return
	}
	for _, name := range names {
		if c.ctx.Err() != nil {
			return
		}
		id, ok := coord.UnescapeName(name)
		if !ok || !c.owns(id) {
			continue
		}
		if principal, kept := c.visit(id); kept {
			c.index.saw(id, principal, seq)
		}
	}
	c.index.endPass(seq, gen)
}

// visit applies pass's rules to one ID, returning the principal that
// created it and whether it is still stored (true, with no principal, when
// it could not be read).
func (c *Coordinator) visit(id string) (principal string, kept bool) {
	mu := c.lock(id)
	m, version, found, err := load(c.store, id)
	if err != nil || !found {
		mu.Unlock()
		if err != nil {
			c.log.Warn("reading a transaction", "transactional_id", id, "err", err)
		}
		return "", err != nil
	}
	now := c.nowMs()
	switch {
	case m.State.prepared():
		mu.Unlock()
		c.completeAsync(id)
		return m.Principal, true
	case timedOut(m, now):
		next := prepareEnd(m, false, true, now)
		if _, err := save(c.store, next, version); err != nil {
			mu.Unlock()
			c.log.Warn("aborting a timed-out transaction", "transactional_id", id, "err", err)
			return m.Principal, true
		}
		mu.Unlock()
		c.log.Info("aborting a transaction past its timeout", "transactional_id", id, "producer_id", m.ProducerID,
			"timeout_ms", m.TimeoutMs, "producer_epoch", next.ProducerEpoch)
		c.completeAsync(id)
		return m.Principal, true
	case expired(m, now, c.cfg.IDExpiration.Milliseconds()):
		if err := remove(c.store, id, version); err != nil {
			c.log.Warn("removing an expired transactional ID", "transactional_id", id, "err", err)
		} else {
			c.log.Info("transactional ID expired", "transactional_id", id, "producer_id", m.ProducerID)
			mu.Unlock()
			return "", false
		}
	}
	mu.Unlock()
	return m.Principal, true
}
