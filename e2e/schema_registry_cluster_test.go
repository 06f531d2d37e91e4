package e2e

// The schema registry of a three-broker ZooKeeper cluster, each broker
// hosting one, through SIGKILLs of the registry's primary and of the
// _schemas partition's leader while schemas are being registered.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"millrace/broker/coord/zk"
	"millrace/internal/waitfor"
	"millrace/internal/zktest"
	"millrace/schemas/registry/election"
)

// registryCluster is a three-broker cluster whose brokers each host a
// registry, urls[id] being broker id's.
type registryCluster struct {
	*localCluster
	urls map[int32]string
	// gen counts each broker's kills and restarts; a read that failed
	// while its broker's generation moved was against a broker going
	// down, not a surviving one.
	gen map[int32]*atomic.Int64
}

// startRegistryCluster starts ZooKeeper and three brokers with their
// registries, and waits until every registry takes a write.
func startRegistryCluster(t *testing.T) *registryCluster {
	t.Helper()
	zkServer := zktest.Start(t)
	c := &registryCluster{
		localCluster: &localCluster{t: t, dir: t.TempDir(), zk: zkServer.Connect(), nodes: map[int32]*clusterNode{}},
		urls:         map[int32]string{},
		gen:          map[int32]*atomic.Int64{},
	}
	for id := int32(1); id <= 3; id++ {
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		c.urls[id] = "http://127.0.0.1:" + strconv.Itoa(freePort(t))
		c.gen[id] = new(atomic.Int64)
		data := t.TempDir()
		args := []string{"broker", "--id", strconv.Itoa(int(id)), "--zookeeper", c.zk, "--listen", addr, "--data", data,
			"--set", "schema.registry.listeners=" + c.urls[id],
			// The short timeouts of up.sh's clusters.
			"--set", "zookeeper.session.timeout.ms=4000", "--set", "replica.lag.time.max.ms=3000",
			"--set", "leader.imbalance.check.interval.seconds=2", "--set", "request.timeout.ms=10000"}
		node := &clusterNode{id: id, addr: addr, args: args, data: data,
			proc: startProcess(t, "broker"+strconv.Itoa(int(id)), args...)}
		c.nodes[id] = node
		c.initial = append(c.initial, id)
	}
	for _, id := range c.initial {
		c.waitReady(c.nodes[id])
	}
	for _, id := range c.initial {
		waitRegistryPrimary(t, c.nodes[id].proc, c.urls[id])
	}
	return c
}

// replicateSchemas gives _schemas three replicas and min.insync.replicas 2.
// The registry creates it with min(3, live brokers) replicas, as
// Confluent's does; the brokers start together, so the first primary may
// have seen fewer than three and the operator's fix (Confluent's warning
// asks for it) is applied here.
func (c *registryCluster) replicateSchemas(adm *kadm.Client) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parts, err := c.partitions(adm, "_schemas")
	if err != nil {
		c.t.Fatal(err)
	}
	if len(parts[0].Replicas) < 3 {
		c.t.Logf("_schemas was created with %d replicas; reassigning it to three", len(parts[0].Replicas))
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("_schemas", 0, []int32{1, 2, 3})
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			c.t.Fatalf("reassigning _schemas to three replicas: %v", err)
		}
	}
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("2")}}, "_schemas")
	if err == nil && len(resp) == 1 {
		err = resp[0].Err
	}
	if err != nil {
		c.t.Fatalf("setting _schemas' min.insync.replicas: %v", err)
	}
	waitfor.Until(c.t, 30*time.Second, "_schemas to have three replicas in sync", func() bool {
		parts, err := c.partitions(adm, "_schemas")
		return err == nil && len(parts[0].Replicas) == 3 && len(parts[0].ISR) == 3
	})
}

// primary is the broker whose registry holds the election's node.
func (c *registryCluster) primary() int32 {
	c.t.Helper()
	store, err := zk.Connect(c.zk, 10*time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		c.t.Fatal(err)
	}
	defer store.Close()
	var id int32
	waitfor.Until(c.t, 30*time.Second, "a schema registry primary node naming a broker", func() bool {
		data, _, err := store.Get(election.DefaultPath)
		var n struct{ URL string }
		if err != nil || json.Unmarshal(data, &n) != nil {
			return false
		}
		for candidate, url := range c.urls {
			if url == n.URL {
				id = candidate
				return true
			}
		}
		return false
	})
	return id
}

// killAndRestart SIGKILLs a broker, waits until another registry takes a
// write, then restarts it and waits until its registry serves.
func (c *registryCluster) killAndRestart(victim int32) {
	c.t.Helper()
	c.gen[victim].Add(1)
	c.signal(victim, syscall.SIGKILL)
	start := time.Now()
	other := c.initial[(int(victim))%len(c.initial)]
	waitRegistryPrimary(c.t, nil, c.urls[other])
	c.t.Logf("broker %d killed; broker %d's registry took a write %v later", victim, other, time.Since(start).Round(time.Millisecond))
	c.restart(victim)
	waitfor.Until(c.t, 30*time.Second, fmt.Sprintf("broker %d's registry to serve again", victim), func() bool {
		status, _, err := srCall(c.urls[victim], http.MethodGet, "/subjects", "")
		return err == nil && status == http.StatusOK
	})
	c.gen[victim].Add(1)
}

// registration is the outcome of registering the schema of index i.
type registration struct {
	id       int // the ID of the 200 that ended the attempts
	failures int // attempts answered 5xx or not at all
	errs     map[string]int
}

// failoverSchema is the i-th schema of the writer: one record type, told
// apart by its doc, so each is a new ID and a new version.
func failoverSchema(i int) string {
	return fmt.Sprintf(`{"type":"record","name":"R","namespace":"fo","doc":"schema %d","fields":[{"name":"n","type":"long"}]}`, i)
}

// TestSchemaRegistryClusterFailover registers schemas one after another
// through the three brokers in turn (a write reaching a non-primary is
// forwarded) while the registry's primary and then the _schemas leader
// are SIGKILLed and restarted, reading from every live broker throughout.
// Every registration ends in a 200 (a client retries the others); its ID
// must read back unchanged from every broker, no schema may hold two IDs,
// and the subject's versions must be exactly 1..N in order.
func TestSchemaRegistryClusterFailover(t *testing.T) {
	t.Parallel()
	const subject, batch = "failover-value", 10
	c := startRegistryCluster(t)
	adm := c.admin()
	c.replicateSchemas(adm)
	if status, body, err := srCall(c.urls[1], http.MethodPut, "/config/"+subject, `{"compatibility":"NONE"}`); err != nil || status != http.StatusOK {
		t.Fatalf("setting %s's compatibility: %d %s %v", subject, status, body, err)
	}

	// The writer registers one schema per token, through broker 1, 2, 3,
	// 1..., retrying an attempt that fails on the next broker.
	tokens := make(chan struct{}, 3*batch)
	results := make([]registration, 3*batch)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		next := 0
		for i := range results {
			<-tokens
			deadline := time.Now().Add(60 * time.Second)
			for {
				url := c.urls[c.initial[next%3]]
				next++
				status, body, err := srCall(url, http.MethodPost, "/subjects/"+subject+"/versions", schemaBody("AVRO", failoverSchema(i)))
				var answer struct{ ID int }
				if err == nil && status == http.StatusOK && json.Unmarshal([]byte(body), &answer) == nil {
					results[i].id = answer.ID
					break
				}
				results[i].failures++
				if results[i].errs == nil {
					results[i].errs = map[string]int{}
				}
				results[i].errs[fmt.Sprintf("%d %.120s %v", status, body, err)]++
				if time.Now().After(deadline) {
					t.Errorf("schema %d: no registration succeeded in 60s; last: %d %s %v", i, status, body, err)
					break
				}
				// A client's pause before it retries, not a wait for a
				// condition: the failover is what it waits out.
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()

	// The reader asks each live broker's registry for the subjects and
	// for the first schema, counting failures against brokers that were
	// up all along.
	stopReads := make(chan struct{})
	var reads, readFailures atomic.Int64
	var lastFailure atomic.Value
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		// A round every 20ms: reads all through the failovers without
		// taking the machine's two cores from the brokers.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopReads:
				return
			case <-tick.C:
			}
			for _, id := range c.initial {
				g := c.gen[id].Load()
				if g%2 == 1 {
					continue // down
				}
				for _, path := range []string{"/subjects", "/schemas/ids/1"} {
					status, body, err := srCall(c.urls[id], http.MethodGet, path, "")
					if err == nil && (status == http.StatusOK || (path != "/subjects" && status == http.StatusNotFound)) {
						reads.Add(1)
						continue
					}
					if c.gen[id].Load() == g {
						readFailures.Add(1)
						lastFailure.Store(fmt.Sprintf("broker %d GET %s: %d %.200s %v", id, path, status, body, err))
					}
				}
			}
		}
	}()

	give := func() {
		for range batch {
			tokens <- struct{}{}
		}
	}
	give()
	primary := c.primary()
	t.Logf("killing the registry's primary, broker %d", primary)
	c.killAndRestart(primary)
	give()
	parts, err := c.partitions(adm, "_schemas")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing _schemas' leader, broker %d (the primary is broker %d)", parts[0].Leader, c.primary())
	c.killAndRestart(parts[0].Leader)
	give()
	waitfor.Until(t, 90*time.Second, "the writer's registrations", func() bool {
		select {
		case <-writerDone:
			return true
		default:
			return false
		}
	})
	close(stopReads)
	<-readerDone

	failed := 0
	for i, r := range results {
		failed += r.failures
		if r.failures > 0 {
			t.Logf("schema %d: %d failed attempts: %v", i, r.failures, r.errs)
		}
	}
	t.Logf("%d registrations, %d failed attempts retried; %d reads, %d failed on a surviving broker", len(results), failed, reads.Load(), readFailures.Load())
	if n := readFailures.Load(); n > 0 {
		t.Errorf("%d reads failed on brokers that were up; the last: %v", n, lastFailure.Load())
	}
	c.checkRegistrations(subject, results)
}

// checkRegistrations reads the subject back from every broker: version i+1
// is schema i with the ID its registration was answered, no schema holds
// two IDs and no ID two schemas.
func (c *registryCluster) checkRegistrations(subject string, results []registration) {
	t := c.t
	t.Helper()
	ids := map[int]int{} // ID → schema index
	for i, r := range results {
		if prev, dup := ids[r.id]; dup {
			t.Errorf("schemas %d and %d were both answered ID %d", prev, i, r.id)
		}
		ids[r.id] = i
	}
	for _, id := range c.initial {
		url := c.urls[id]
		// A restarted broker's view may still be reading the log's end.
		waitfor.Until(t, 30*time.Second, fmt.Sprintf("broker %d to list %d versions", id, len(results)), func() bool {
			status, body, err := srCall(url, http.MethodGet, "/subjects/"+subject+"/versions", "")
			var versions []int
			return err == nil && status == http.StatusOK && json.Unmarshal([]byte(body), &versions) == nil && len(versions) >= len(results)
		})
		_, body, _ := srCall(url, http.MethodGet, "/subjects/"+subject+"/versions", "")
		var versions []int
		json.Unmarshal([]byte(body), &versions)
		if len(versions) != len(results) {
			t.Errorf("broker %d lists versions %v; want 1..%d", id, versions, len(results))
			continue
		}
		for i, v := range versions {
			if v != i+1 {
				t.Errorf("broker %d lists versions %v; want 1..%d", id, versions, len(results))
				break
			}
		}
		for i, r := range results {
			status, body, err := srCall(url, http.MethodGet, "/subjects/"+subject+"/versions/"+strconv.Itoa(i+1), "")
			var got struct {
				ID     int
				Schema string
			}
			if err != nil || status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
				t.Errorf("broker %d: version %d: %d %s %v", id, i+1, status, body, err)
				continue
			}
			if got.ID != r.id || got.Schema != failoverSchema(i) {
				t.Errorf("broker %d: version %d is ID %d %s; want schema %d's registration, ID %d", id, i+1, got.ID, got.Schema, i, r.id)
			}
			status, body, err = srCall(url, http.MethodGet, "/schemas/ids/"+strconv.Itoa(r.id)+"/versions", "")
			var used []struct{ Subject string }
			if err != nil || status != http.StatusOK || json.Unmarshal([]byte(body), &used) != nil || len(used) != 1 {
				t.Errorf("broker %d: ID %d is used by %s (%d %v); want one subject-version", id, r.id, body, status, err)
			}
		}
	}
}
