package cluster

// Following the coordination session (replicated mode), as the coord/zk
// package doc asks of every owner: on SessionExpired, or after being
// disconnected for longer than the session timeout (the ensemble may have
// expired the session meanwhile without this broker hearing of it), the
// broker stops acting as leader and controller at once (SessionOK turns
// false). When the session is usable again it resumes only after the model
// was re-read under it (sync.go), so it never acts on a leadership it lost
// while it was away. Ephemerals are re-created by their owners: the broker
// registration (brokers.go) and the controller candidacy (controller.go)
// notice through their watches, which end with EventNotWatching.

import (
	"time"

	"millrace/broker/coord"
)

func (c *Cluster) runSession(bg *background) {
	defer bg.wg.Done()
	events := c.store.SessionEvents()
	var timer *time.Timer
	var timeout <-chan time.Time
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer, timeout = nil, nil
		}
	}
	defer stopTimer()
	lose := func(why string) {
		if c.sessionOK.Swap(false) {
			c.logger.Warn("coordination session lost; no longer leading or controlling", "why", why)
		}
		c.poke()
	}
	for {
		select {
		case <-bg.stopping:
			return
		case <-timeout:
			timer, timeout = nil, nil
			lose("disconnected for longer than the session timeout")
		case ev, ok := <-events:
			if !ok {
				return
			}
			switch ev {
			case coord.SessionDisconnected:
				if timer == nil {
					timer = time.NewTimer(c.cfg.SessionTimeout)
					timeout = timer.C
				}
			case coord.SessionExpired:
				stopTimer()
				lose("session expired")
			case coord.SessionConnected:
				stopTimer()
				if !c.sessionOK.Load() {
					bg.mu.Lock()
					bg.resumeAfterRefresh = true
					bg.mu.Unlock()
				}
				kick(bg.syncKick)
				c.poke()
			}
		}
	}
}
