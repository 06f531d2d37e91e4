package cluster

// The controller at run time (replicated mode). Every broker is a candidate:
// the one that creates the ephemeral /controller node leads, bumps
// /controller_epoch with compare-and-set, and then, on every change of the
// model or of the live brokers (and every leader.imbalance.check.interval),
// asks the pure decision functions what to do and writes the resulting
// partition states with compare-and-set on the version it read:
//
//   - ElectOnBrokerChange: new leaders for partitions whose leader died,
//     dead brokers out of the ISR, offline partitions back online;
//   - PreferredLeaderElections (auto.leader.rebalance.enable): leadership
//     back to the preferred replica once it is in sync again, so leader
//     counts stay even after a broker returns;
//   - NextReassignmentStep: one step of each pending partition
//     reassignment (reassign.go);
//   - NextDeletionStep: one step of each pending topic deletion
//     (delete.go).
//
// Brokers learn their role by watching their partitions' state znodes
// (sync.go), as in the seed; there is no LeaderAndIsr request. A write that
// loses its compare-and-set (a leader changed the ISR meanwhile) is simply
// decided again after the refresh it causes: the decisions are
// level-triggered. The others watch /controller and try again when it goes.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"millrace/broker/coord"
)

const (
	controllerPath      = "/controller"
	controllerEpochPath = "/controller_epoch"
)

// controllerZnode is /controller: {"version":1,"brokerid":1,"timestamp":"..."}.
type controllerZnode struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Timestamp string `json:"timestamp"`
}

func (c *Cluster) runController(bg *background) {
	defer bg.wg.Done()
	for {
		select {
		case <-bg.stopping:
			return
		default:
		}
		if !c.sessionOK.Load() {
			c.controllerID.Store(-1)
			if !c.waitController(bg, nil, nil) {
				return
			}
			continue
		}
		epoch, watch, err := c.tryBecomeController()
		switch {
		case err != nil:
			c.logger.Warn("controller election failed; retrying", "err", err)
			if !c.waitController(bg, nil, time.After(retryInterval)) {
				return
			}
		case watch != nil:
			if !c.waitController(bg, watch, nil) {
				return
			}
		default:
			c.logger.Info("elected controller", "broker_id", c.cfg.BrokerID, "controller_epoch", epoch)
			c.controllerEpoch.Store(epoch)
			c.actAsController(bg, epoch)
			c.controllerEpoch.Store(0)
			c.controllerID.Store(-1)
		}
	}
}

// waitController waits for the /controller watch, a kick, a timer or the
// end; false means stop.
func (c *Cluster) waitController(bg *background, watch <-chan coord.Event, timer <-chan time.Time) bool {
	select {
	case <-bg.stopping:
		return false
	case <-watch:
	case <-bg.controllerKick:
	case <-timer:
	}
	return true
}

// tryBecomeController creates /controller. It returns the new controller
// epoch when it won, or a watch on the node another broker holds.
func (c *Cluster) tryBecomeController() (int32, <-chan coord.Event, error) {
	z := controllerZnode{Version: 1, BrokerID: c.cfg.BrokerID, Timestamp: strconv.FormatInt(time.Now().UnixMilli(), 10)}
	_, err := c.store.Create(controllerPath, mustJSON(z), coord.Ephemeral)
	if errors.Is(err, coord.ErrNodeExists) {
		data, _, watch, err := c.store.GetW(controllerPath)
		if errors.Is(err, coord.ErrNoNode) {
			return 0, nil, fmt.Errorf("cluster: %s went away while being read", controllerPath)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("cluster: reading %s: %w", controllerPath, err)
		}
		var other controllerZnode
		if err := json.Unmarshal(data, &other); err != nil {
			c.logger.Warn("unreadable controller node", "data", string(data))
			other.BrokerID = -1
		}
		c.controllerID.Store(other.BrokerID)
		return 0, watch, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("cluster: creating %s: %w", controllerPath, err)
	}
	epoch, err := c.bumpControllerEpoch()
	if err != nil {
		// Give the role up rather than act without an epoch.
		if derr := c.store.Delete(controllerPath, coord.AnyVersion); derr != nil {
			c.logger.Warn("resigning as controller", "err", derr)
		}
		return 0, nil, err
	}
	c.controllerID.Store(c.cfg.BrokerID)
	return epoch, nil, nil
}

// bumpControllerEpoch increments /controller_epoch with compare-and-set
// (creating it at 1) and returns the new epoch.
func (c *Cluster) bumpControllerEpoch() (int32, error) {
	for attempt := 0; attempt < 10; attempt++ {
		data, stat, err := c.store.Get(controllerEpochPath)
		if errors.Is(err, coord.ErrNoNode) {
			if _, err := c.store.Create(controllerEpochPath, []byte("1"), coord.Persistent); err == nil {
				return 1, nil
			} else if !errors.Is(err, coord.ErrNodeExists) {
				return 0, fmt.Errorf("cluster: creating %s: %w", controllerEpochPath, err)
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("cluster: reading %s: %w", controllerEpochPath, err)
		}
		n, err := strconv.ParseInt(string(data), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("cluster: %s holds %q, not an epoch", controllerEpochPath, data)
		}
		if _, err := c.store.Set(controllerEpochPath, []byte(strconv.FormatInt(n+1, 10)), stat.Version); err == nil {
			return int32(n + 1), nil
		} else if !errors.Is(err, coord.ErrBadVersion) {
			return 0, fmt.Errorf("cluster: writing %s: %w", controllerEpochPath, err)
		}
	}
	return 0, fmt.Errorf("cluster: %s kept changing under compare-and-set", controllerEpochPath)
}

// actAsController runs controller passes until the session is lost or the
// cluster closes.
func (c *Cluster) actAsController(bg *background, epoch int32) {
	ticker := time.NewTicker(c.cfg.LeaderImbalanceCheckInterval)
	defer ticker.Stop()
	for c.sessionOK.Load() {
		c.controllerPass(epoch)
		select {
		case <-bg.stopping:
			return
		case <-bg.controllerKick:
		case <-ticker.C:
		}
	}
	c.logger.Warn("stopped acting as controller: the coordination session was lost", "controller_epoch", epoch)
}

// ControllerView returns the controller's view of the model now.
func (c *Cluster) controllerView(epoch int32) ControllerView {
	view := ControllerView{Alive: AliveSet(c.Brokers()), UncleanTopics: map[string]bool{}, ControllerEpoch: epoch,
		Reassigning: c.reassigning()}
	for _, t := range c.Topics() {
		if c.TopicSetting(t, "unclean.leader.election.enable") == "true" {
			view.UncleanTopics[t.Name] = true
		}
		for _, p := range t.Partitions {
			if p.StateVersion >= 0 {
				view.Partitions = append(view.Partitions, p)
			}
		}
	}
	return view
}

// controllerPass decides and writes what the model calls for now.
func (c *Cluster) controllerPass(epoch int32) {
	view := c.controllerView(epoch)
	elections := ElectOnBrokerChange(view)
	if len(elections) == 0 && c.cfg.AutoLeaderRebalance {
		elections = PreferredLeaderElections(view)
	}
	for _, e := range elections {
		if !c.sessionOK.Load() {
			return
		}
		_, err := c.store.Set(partitionStatePath(e.New.Topic, e.New.Partition), encodePartitionState(e.New), e.Old.StateVersion)
		switch {
		case err == nil:
			c.logger.Info("partition state written", "topic", e.New.Topic, "partition", e.New.Partition, "reason", string(e.Reason),
				"leader", e.New.Leader, "leader_epoch", e.New.LeaderEpoch, "isr", e.New.ISR, "unclean", e.Unclean)
		case errors.Is(err, coord.ErrBadVersion):
			// Changed meanwhile (an ISR update); the refresh it causes
			// brings the next pass.
			c.logger.Debug("partition state changed under the controller; deciding again", "topic", e.New.Topic, "partition", e.New.Partition)
		default:
			c.logger.Warn("writing a partition state", "topic", e.New.Topic, "partition", e.New.Partition, "err", err)
		}
	}
	if len(elections) == 0 && c.sessionOK.Load() {
		// Reassignment steps wait for leaderless partitions to be
		// elected first: they need a leader to copy from.
		c.reassignPass(epoch)
	}
	if c.sessionOK.Load() {
		c.deletionPass(epoch)
	}
}
