package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/acl"
	"millrace/broker/quota"
	"millrace/internal/waitfor"
)

func named(s string) *string { return &s }

// TestClientQuotasRoundTrip: kadm's AlterClientQuotas and
// DescribeClientQuotas round-trip every entity type, defaults included;
// the values land in Kafka's znodes; filters match as Kafka's do.
func TestClientQuotasRoundTrip(t *testing.T) {
	t.Parallel()
	tb := startBroker(t)
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	user := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "user", Name: n}
	}
	client := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "client-id", Name: n}
	}
	entities := []kadm.ClientQuotaEntity{
		{user(named("alice"))}, {user(nil)}, {client(named("app one"))}, {client(nil)},
		{user(named("alice")), client(named("app one"))}, {user(named("alice")), client(nil)},
		{user(nil), client(named("app one"))}, {user(nil), client(nil)},
	}
	var entries []kadm.AlterClientQuotaEntry
	for i, e := range entities {
		entries = append(entries, kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{
			{Key: "producer_byte_rate", Value: float64(1024 * (i + 1))}, {Key: "request_percentage", Value: 12.5},
		}})
	}
	altered, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil || len(altered) != len(entities) {
		t.Fatal(altered, err)
	}
	for _, a := range altered {
		if a.Err != nil {
			t.Fatalf("%s: %v %s", a.Entity, a.Err, a.ErrMessage)
		}
	}
	described, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(described) != len(entities) {
		t.Fatalf("described %v (%v)", described, err)
	}
	got := map[string]kadm.ClientQuotaValues{}
	for _, d := range described {
		got[d.Entity.String()] = d.Values
	}
	for i, e := range entities {
		v := got[e.String()]
		if len(v) != 2 || v[0].Key != "producer_byte_rate" || v[0].Value != float64(1024*(i+1)) || v[1].Value != 12.5 {
			t.Errorf("%s described as %v", e, v)
		}
	}
	// The store holds them at Kafka's paths, names sanitized.
	values, err := quota.Read(tb.store, quota.UserClientEntity(quota.Default, "app%20one"))
	if err != nil || values[quota.ProducerByteRate] != 1024*7 {
		t.Fatalf("/config/users/<default>/clients/app%%20one: %v %v", values, err)
	}

	filters := []struct {
		name       string
		strict     bool
		components []kadm.DescribeClientQuotaComponent
		want       int
	}{
		{"any user, strict: user entities only", true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}}, 2},
		{"any user: with their client-ids", false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}}, 6},
		{"exact user alice", false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0, MatchName: named("alice")}}, 3},
		{"default client-id", false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 1}}, 3},
		{"default user and exact client, strict", true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 1}, {Type: "client-id", MatchType: 0, MatchName: named("app one")}}, 1},
	}
	for _, f := range filters {
		d, err := adm.DescribeClientQuotas(ctx, f.strict, f.components)
		if err != nil || len(d) != f.want {
			t.Errorf("%s: %d entities (%v), want %d", f.name, len(d), err, f.want)
		}
	}

	// Removing keys: an entity with none left is gone.
	var removals []kadm.AlterClientQuotaEntry
	for _, e := range entities {
		removals = append(removals, kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}}})
	}
	if _, err := adm.AlterClientQuotas(ctx, removals); err != nil {
		t.Fatal(err)
	}
	if d, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(d) != 0 {
		t.Fatalf("after removing every key: %v %v", d, err)
	}
}

// TestClientQuotasValidation: Kafka's per-entry errors, nothing applied
// for an entry that has one, and validate_only writes nothing.
func TestClientQuotasValidation(t *testing.T) {
	t.Parallel()
	tb := startBroker(t)
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	alice := kadm.ClientQuotaEntity{{Type: "user", Name: named("alice")}}
	cases := []struct {
		name   string
		entity kadm.ClientQuotaEntity
		ops    []kadm.AlterClientQuotaOp
	}{
		{"unknown key", alice, []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}, {Key: "bogus", Value: 1}}},
		{"negative value", alice, []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: -1}}},
		{"fractional byte rate (a LONG in Kafka)", alice, []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
		{"key twice", alice, []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1}, {Key: "request_percentage", Remove: true}}},
		{"empty entity", nil, []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1}}},
		{"user twice", kadm.ClientQuotaEntity{{Type: "user", Name: named("a")}, {Type: "user", Name: named("b")}}, []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1}}},
		{"unknown type", kadm.ClientQuotaEntity{{Type: "group", Name: named("g")}}, []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1}}},
		{"empty name", kadm.ClientQuotaEntity{{Type: "client-id", Name: named("")}}, []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1}}},
	}
	var entries []kadm.AlterClientQuotaEntry
	for _, c := range cases {
		entries = append(entries, kadm.AlterClientQuotaEntry{Entity: c.entity, Ops: c.ops})
	}
	entries = append(entries, kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: named("ok")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 2.5}}})
	altered, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil || len(altered) != len(entries) {
		t.Fatal(altered, err)
	}
	for i, c := range cases {
		if !errors.Is(altered[i].Err, kerr.InvalidRequest) || altered[i].ErrMessage == "" {
			t.Errorf("%s: %v %q, want INVALID_REQUEST with a message", c.name, altered[i].Err, altered[i].ErrMessage)
		}
	}
	if last := altered[len(cases)]; last.Err != nil {
		t.Fatalf("the valid entry failed: %v", last.Err)
	}
	all, err := quota.List(tb.store)
	if err != nil || len(all) != 1 || all[quota.ClientEntity("ok")][quota.ControllerMutationRate] != 2.5 {
		t.Fatalf("stored %v (%v): only the valid entry", all, err)
	}

	validated, err := adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: alice, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10}}}})
	if err != nil || validated[0].Err != nil {
		t.Fatal(validated, err)
	}
	if v, _ := quota.Read(tb.store, quota.UserEntity("alice")); len(v) != 0 {
		t.Fatalf("validate_only wrote %v", v)
	}
	for _, bad := range [][]kadm.DescribeClientQuotaComponent{
		{{Type: "user", MatchType: 0}},
		{{Type: "user", MatchType: 2}, {Type: "user", MatchType: 1}},
		{{Type: "group", MatchType: 2}},
		{{Type: "user", MatchType: 7}},
	} {
		if _, err := adm.DescribeClientQuotas(ctx, false, bad); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("filter %+v: %v, want INVALID_REQUEST", bad, err)
		}
	}
}

// TestClientQuotasNeedCluster: with an authorizer, describing needs
// DescribeConfigs and altering AlterConfigs on the cluster, as in Kafka.
func TestClientQuotasNeedCluster(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, withAuthorizer(""))
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	entry := []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: nil}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10}}}}
	if altered, err := adm.AlterClientQuotas(ctx, entry); err != nil || !errors.Is(altered[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("AlterClientQuotas: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, altered)
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("DescribeClientQuotas: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	grant(t, tb, clusterACL(acl.DescribeConfigs), clusterACL(acl.AlterConfigs))
	if altered, err := adm.AlterClientQuotas(ctx, entry); err != nil || altered[0].Err != nil {
		t.Errorf("AlterClientQuotas with AlterConfigs: %v %+v", err, altered)
	}
	if d, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(d) != 1 {
		t.Errorf("DescribeClientQuotas with DescribeConfigs: %v %v", d, err)
	}
}

// TestIPQuotasRoundTrip: ip entities (KIP-612) through kadm: set for an
// address and for the default, described back (every spelling of an
// address naming one entity), filtered by Kafka's rules, refused where
// Kafka refuses them, and enforced once a follower applies them: the
// connections from 127.0.0.1 beyond its rate wait and are served.
func TestIPQuotasRoundTrip(t *testing.T) {
	t.Parallel()
	manager := quota.NewManager(0)
	tb := startBroker(t, withConfig(func(c *Config) { c.Quotas = manager }))
	follower := quota.NewFollower(tb.store, manager, nil)
	follower.Start()
	t.Cleanup(func() { follower.Close() })
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	ip := func(n *string) kadm.ClientQuotaEntity {
		return kadm.ClientQuotaEntity{{Type: "ip", Name: n}}
	}
	rate := func(v float64) []kadm.AlterClientQuotaOp {
		return []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: v}}
	}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: ip(named("127.0.0.1")), Ops: rate(5)},
		{Entity: ip(nil), Ops: rate(1000)},
		{Entity: ip(named("0:0:0:0:0:0:0:1")), Ops: rate(7)},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: named("alice")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range altered {
		if a.Err != nil {
			t.Fatalf("%s: %v %s", a.Entity, a.Err, a.ErrMessage)
		}
	}
	if v, err := quota.Read(tb.store, quota.IPEntity("::1")); err != nil || v[quota.ConnectionCreationRate] != 7 {
		t.Fatalf("/config/ips/::1: %v %v", v, err)
	}
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 2}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, d := range described {
		if len(d.Values) != 1 || d.Values[0].Key != "connection_creation_rate" {
			t.Fatalf("%s described as %v", d.Entity, d.Values)
		}
		got[d.Entity.String()] = d.Values[0].Value
	}
	want := map[string]float64{"{ip=127.0.0.1}": 5, "{ip=<default>}": 1000, "{ip=::1}": 7}
	if len(got) != len(want) {
		t.Fatalf("ip entities described: %v, want %v", got, want)
	}
	for e, v := range want {
		if got[e] != v {
			t.Errorf("%s: %v, want %v (all: %v)", e, got[e], v, got)
		}
	}

	filters := []struct {
		name       string
		strict     bool
		components []kadm.DescribeClientQuotaComponent
		want       int
	}{
		{"no filter: users and ips", false, nil, 4},
		{"exact ip, another spelling", false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 0, MatchName: named("::ffff:127.0.0.1")}}, 1},
		{"default ip, strict", true, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 1}}, 1},
		{"any user: no ip", false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}}, 1},
	}
	for _, f := range filters {
		if d, err := adm.DescribeClientQuotas(ctx, f.strict, f.components); err != nil || len(d) != f.want {
			t.Errorf("%s: %d entities (%v), want %d", f.name, len(d), err, f.want)
		}
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 2}, {Type: "user", MatchType: 2}}); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("an ip filter beside a user one: %v, want INVALID_REQUEST", err)
	}
	refused := []struct {
		name  string
		entry kadm.AlterClientQuotaEntry
	}{
		{"ip with a user", kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: named("10.0.0.1")}, {Type: "user", Name: named("u")}}, Ops: rate(1)}},
		{"a host name", kadm.AlterClientQuotaEntry{Entity: ip(named("localhost")), Ops: rate(1)}},
		{"a client quota on an ip", kadm.AlterClientQuotaEntry{Entity: ip(named("10.0.0.1")), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}},
		{"an ip quota on a client-id", kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: nil}}, Ops: rate(1)}},
		{"a fractional rate (an INT)", kadm.AlterClientQuotaEntry{Entity: ip(named("10.0.0.1")), Ops: rate(1.5)}},
	}
	for _, r := range refused {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{r.entry})
		if err != nil || !errors.Is(res[0].Err, kerr.InvalidRequest) {
			t.Errorf("%s: %v %+v, want INVALID_REQUEST", r.name, err, res)
		}
	}

	// Enforced: 8 connections from 127.0.0.1 at 5 a second take 600ms.
	waitfor.Until(t, 2*time.Second, "the follower applies 127.0.0.1's quota", func() bool {
		r, ok := manager.ConnectionCreationRate("127.0.0.1")
		return ok && r == 5
	})
	start := time.Now()
	for i := range 8 {
		dial(t, tb.addr).apiVersionsOK(int32(i))
	}
	if elapsed := time.Since(start); elapsed < 600*time.Millisecond {
		t.Errorf("8 connections from 127.0.0.1 served in %v, want at least 600ms at 5 per second", elapsed)
	}

	var removals []kadm.AlterClientQuotaEntry
	for _, e := range []kadm.ClientQuotaEntity{ip(named("127.0.0.1")), ip(nil), ip(named("::1"))} {
		removals = append(removals, kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Remove: true}}})
	}
	if _, err := adm.AlterClientQuotas(ctx, removals); err != nil {
		t.Fatal(err)
	}
	if d, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 2}}); err != nil || len(d) != 0 {
		t.Fatalf("after removing every ip quota: %v %v", d, err)
	}
}
