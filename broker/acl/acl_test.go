package acl

import (
	"fmt"
	"strings"
	"testing"
)

// aclTable is the ACL set the decision table is judged against.
var aclTable = []Binding{
	{Pattern{Topic, "orders", Literal}, Entry{"User:alice", "*", Write, Allow}},
	{Pattern{Topic, "orders", Literal}, Entry{"User:alice", "10.0.0.9", Write, Deny}},
	{Pattern{Topic, "orders", Literal}, Entry{"User:bob", "*", Read, Allow}},
	{Pattern{Topic, "orders", Literal}, Entry{"User:bob", "*", Describe, Deny}},
	{Pattern{Topic, "logs-", Prefixed}, Entry{"User:carol", "*", Read, Allow}},
	{Pattern{Topic, "logs-secret", Prefixed}, Entry{"User:carol", "*", All, Deny}},
	{Pattern{Topic, "*", Literal}, Entry{"User:*", "10.0.0.1", Describe, Allow}},
	{Pattern{Topic, "config", Literal}, Entry{"User:dave", "*", AlterConfigs, Allow}},
	{Pattern{Topic, "any", Literal}, Entry{"User:erin", "*", All, Allow}},
	{Pattern{Group, "sink", Literal}, Entry{"User:*", "*", Read, Allow}},
	{Pattern{Group, "sink", Literal}, Entry{"User:mallory", "*", All, Deny}},
	{Pattern{Cluster, ClusterName, Literal}, Entry{"User:broker", "*", ClusterAction, Allow}},
}

// TestDecisionTable is the authorizer's golden table: each line is a
// request and the decision Kafka's AclAuthorizer makes for it.
func TestDecisionTable(t *testing.T) {
	acls := map[Pattern][]Entry{}
	for _, b := range aclTable {
		acls[b.Pattern] = append(acls[b.Pattern], b.Entry)
	}
	snap := NewSnapshot(acls)
	strict := Settings{SuperUsers: ParseSuperUsers(" User:root ; User:CN=ops,O=x ;")}
	open := Settings{AllowIfNoACL: true}
	cases := []struct {
		why       string
		set       Settings
		principal string
		host      string
		op        Operation
		typ       ResourceType
		name      string
		want      bool
	}{
		{"literal allow", strict, "User:alice", "10.0.0.2", Write, Topic, "orders", true},
		{"deny wins over allow for the same host", strict, "User:alice", "10.0.0.9", Write, Topic, "orders", false},
		{"write implies describe", strict, "User:alice", "10.0.0.2", Describe, Topic, "orders", true},
		{"write does not imply read", strict, "User:alice", "10.0.0.2", Read, Topic, "orders", false},
		{"read allowed", strict, "User:bob", "10.0.0.2", Read, Topic, "orders", true},
		{"deny of describe denies describe though read implies it", strict, "User:bob", "10.0.0.2", Describe, Topic, "orders", false},
		{"other principal has no allow", strict, "User:zed", "10.0.0.2", Read, Topic, "orders", false},
		{"prefix match", strict, "User:carol", "10.0.0.2", Read, Topic, "logs-app", true},
		{"prefix does not match a shorter name", strict, "User:carol", "10.0.0.2", Read, Topic, "logs", false},
		{"deny All on a longer prefix wins", strict, "User:carol", "10.0.0.2", Read, Topic, "logs-secret-1", false},
		{"wildcard principal and host-bound wildcard resource", strict, "User:zed", "10.0.0.1", Describe, Topic, "anything", true},
		{"wildcard resource allow is bound to its host", strict, "User:zed", "10.0.0.2", Describe, Topic, "anything", false},
		{"alterconfigs implies describeconfigs", strict, "User:dave", "h", DescribeConfigs, Topic, "config", true},
		{"describeconfigs does not imply alterconfigs", strict, "User:dave", "h", Alter, Topic, "config", false},
		{"All allows every operation", strict, "User:erin", "h", Delete, Topic, "any", true},
		{"All allows cluster-less ops too", strict, "User:erin", "h", IdempotentWrite, Topic, "any", true},
		{"wildcard principal on a group", strict, "User:zed", "h", Read, Group, "sink", true},
		{"deny All on a group for one principal", strict, "User:mallory", "h", Describe, Group, "sink", false},
		{"cluster action", strict, "User:broker", "h", ClusterAction, Cluster, ClusterName, true},
		{"cluster action denied to others", strict, "User:alice", "h", ClusterAction, Cluster, ClusterName, false},
		{"super user bypasses a deny", strict, "User:root", "10.0.0.9", Write, Topic, "orders", true},
		{"super user with a comma in its name", strict, "User:CN=ops,O=x", "h", Delete, Group, "sink", true},
		{"no acl found, default denies", strict, "User:alice", "h", Read, Group, "unlisted", false},
		{"no acl found, allow.everyone.if.no.acl.found", open, "User:alice", "h", Read, Group, "unlisted", true},
		{"an acl exists, allow.everyone does not apply", open, "User:zed", "10.0.0.2", Read, Topic, "orders", false},
		{"no acl found for the transactional id", open, "User:zed", "h", Write, TransactionalID, "tx", true},
	}
	for _, c := range cases {
		if got := snap.Authorize(c.set, c.principal, c.host, c.op, c.typ, c.name); got != c.want {
			t.Errorf("%s: %s@%s %v %v:%s = %v, want %v", c.why, c.principal, c.host, c.op, c.typ, c.name, got, c.want)
		}
	}
}

func TestEmptySnapshot(t *testing.T) {
	var nilSnap *Snapshot
	for _, s := range []*Snapshot{nilSnap, NewSnapshot(map[Pattern][]Entry{})} {
		if s.Authorize(Settings{}, "User:a", "h", Read, Topic, "t") {
			t.Error("no ACLs and allow.everyone.if.no.acl.found=false must deny")
		}
		if !s.Authorize(Settings{AllowIfNoACL: true}, "User:a", "h", Read, Topic, "t") {
			t.Error("no ACLs and allow.everyone.if.no.acl.found=true must allow")
		}
	}
}

func TestAnyAllowed(t *testing.T) {
	snap := NewSnapshot(map[Pattern][]Entry{
		{Topic, "a", Literal}:   {{"User:p", "*", Write, Allow}},
		{Topic, "*", Literal}:   {{"User:q", "*", Write, Deny}},
		{Topic, "b-", Prefixed}: {{"User:q", "*", Write, Allow}},
	})
	for _, c := range []struct {
		principal string
		want      bool
	}{{"User:p", true}, {"User:q", false}, {"User:r", false}} {
		if got := snap.AnyAllowed(Settings{}, c.principal, "h", Write, Topic); got != c.want {
			t.Errorf("%s may write some topic = %v, want %v", c.principal, got, c.want)
		}
	}
}

func TestFilters(t *testing.T) {
	acls := map[Pattern][]Entry{}
	for _, b := range aclTable {
		acls[b.Pattern] = append(acls[b.Pattern], b.Entry)
	}
	snap := NewSnapshot(acls)
	name := func(s string) *string { return &s }
	cases := []struct {
		why    string
		filter Filter
		want   []string
	}{
		{"match finds literal, wildcard and prefix patterns", Filter{Topic, name("logs-secret"), MatchPattern, nil, nil, AnyOperation, AnyPermission},
			[]string{"Topic:LITERAL:* User:*@10.0.0.1 Allow Describe", "Topic:PREFIXED:logs- User:carol@* Allow Read", "Topic:PREFIXED:logs-secret User:carol@* Deny All"}},
		{"any pattern with a name matches the name exactly", Filter{Topic, name("logs-"), AnyPattern, nil, nil, AnyOperation, AnyPermission},
			[]string{"Topic:PREFIXED:logs- User:carol@* Allow Read"}},
		{"literal type excludes prefixed", Filter{AnyResource, nil, Literal, name("User:carol"), nil, AnyOperation, AnyPermission}, nil},
		{"principal and permission", Filter{AnyResource, nil, AnyPattern, name("User:alice"), nil, AnyOperation, Deny},
			[]string{"Topic:LITERAL:orders User:alice@10.0.0.9 Deny Write"}},
		{"operation", Filter{Cluster, nil, AnyPattern, nil, nil, ClusterAction, AnyPermission},
			[]string{"Cluster:LITERAL:kafka-cluster User:broker@* Allow ClusterAction"}},
	}
	for _, c := range cases {
		var got []string
		for _, b := range snap.Select(c.filter) {
			got = append(got, fmt.Sprintf("%v %s@%s %v %v", b.Pattern, b.Entry.Principal, b.Entry.Host, b.Entry.Permission, b.Entry.Operation))
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\ngot  %q\nwant %q", c.why, got, c.want)
		}
	}
}

func TestBindingValidate(t *testing.T) {
	ok := Binding{Pattern{Topic, "t", Literal}, Entry{"User:a", "*", Read, Allow}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Binding{
		{Pattern{AnyResource, "t", Literal}, ok.Entry},
		{Pattern{Topic, "t", MatchPattern}, ok.Entry},
		{Pattern{Topic, "a/b", Literal}, ok.Entry},
		{Pattern{Topic, "", Literal}, ok.Entry},
		{Pattern{Topic, "*", Prefixed}, ok.Entry},
		{Pattern{Cluster, "other", Literal}, ok.Entry},
		{ok.Pattern, Entry{"alice", "*", Read, Allow}},
		{ok.Pattern, Entry{"User:a", "", Read, Allow}},
		{ok.Pattern, Entry{"User:a", "*", AnyOperation, Allow}},
		{ok.Pattern, Entry{"User:a", "*", Read, AnyPermission}},
	}
	for _, b := range bad {
		if err := b.Validate(); err == nil {
			t.Errorf("%+v: want an error", b)
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Operation{"read": Read, "DESCRIBE_CONFIGS": DescribeConfigs, "IdempotentWrite": IdempotentWrite, "ALL": All} {
		if got, err := ParseOperation(in); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseOperation("fly"); err == nil {
		t.Error("ParseOperation(fly): want an error")
	}
	if got, err := ParseResourceType("transactionalid"); err != nil || got != TransactionalID {
		t.Errorf("ParseResourceType = %v, %v", got, err)
	}
}

// BenchmarkAuthorize times one decision with 1000 literal and 100 prefixed
// topic ACLs, the per-topic cost a Produce or Fetch pays.
func BenchmarkAuthorize(b *testing.B) {
	acls := map[Pattern][]Entry{}
	for i := range 1000 {
		acls[Pattern{Topic, fmt.Sprintf("topic-%d", i), Literal}] = []Entry{{fmt.Sprintf("User:u%d", i%50), "*", Write, Allow}}
	}
	for i := range 100 {
		acls[Pattern{Topic, fmt.Sprintf("team-%d-", i), Prefixed}] = []Entry{{fmt.Sprintf("User:u%d", i), "*", Read, Allow}}
	}
	snap := NewSnapshot(acls)
	set := Settings{SuperUsers: []string{"User:admin"}}
	for _, c := range []struct {
		name, principal, topic string
		op                     Operation
	}{
		{"literal", "User:u7", "topic-507", Write},
		{"prefixed", "User:u42", "team-42-clicks", Read},
		{"denied", "User:u1", "topic-2", Write},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				snap.Authorize(set, c.principal, "10.0.0.1", c.op, Topic, c.topic)
			}
		})
	}
}
