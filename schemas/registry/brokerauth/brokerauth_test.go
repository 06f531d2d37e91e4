package brokerauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"millrace/broker/acl"
	"millrace/broker/users"
	"millrace/schemas/registry"
)

// credentials is a fixed set of users.
type credentials map[string]users.Credential

func (c credentials) LookupAny(user string) (users.Credential, bool) {
	cred, ok := c[user]
	return cred, ok
}

func newCredentials(t *testing.T, passwords map[string]string) credentials {
	t.Helper()
	out := credentials{}
	for user, password := range passwords {
		cred, err := users.NewCredential(users.SCRAMSHA512, password, users.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		out[user] = cred
	}
	return out
}

func request(user, password string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/subjects", nil)
	if user != "" {
		r.SetBasicAuth(user, password)
	}
	return r
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	a, err := New(Config{Users: newCredentials(t, map[string]string{"alice": "secret"})})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, user, password string
		want                 error
	}{
		{"no credentials", "", "", ErrNoCredentials},
		{"wrong password", "alice", "guess", ErrInvalid},
		{"unknown user", "mallory", "secret", ErrInvalid},
		{"invalid user name", "a\x00b", "secret", ErrInvalid},
		{"right password", "alice", "secret", nil},
		{"right password again, from the verified cache", "alice", "secret", nil},
		{"wrong password after a right one", "alice", "secret2", ErrInvalid},
	} {
		principal, err := a.Authenticate(request(c.user, c.password))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		if c.want == nil && principal != "User:alice" {
			t.Errorf("%s: principal %q, want User:alice", c.name, principal)
		}
	}
}

// TestAuthenticateWaitsForCheckSlot: with every password check slot taken,
// a request waits only as long as its context allows.
func TestAuthenticateWaitsForCheckSlot(t *testing.T) {
	t.Parallel()
	a, err := New(Config{Users: newCredentials(t, map[string]string{"alice": "secret"}), MaxConcurrentChecks: 1})
	if err != nil {
		t.Fatal(err)
	}
	a.checks <- struct{}{} // a check in progress
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Authenticate(request("alice", "secret").WithContext(ctx)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the request's context error", err)
	}
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	allow := func(principal string, op acl.Operation, typ acl.ResourceType, name, host string, permission acl.Permission) acl.Binding {
		return acl.Binding{Pattern: acl.Pattern{Type: typ, Name: name, PatternType: acl.Literal},
			Entry: acl.Entry{Principal: principal, Host: host, Operation: op, Permission: permission}}
	}
	bindings := []acl.Binding{
		allow("User:writer", acl.Write, acl.Topic, "_schemas", "*", acl.Allow),
		allow("User:ops", acl.AlterConfigs, acl.Cluster, acl.ClusterName, "*", acl.Allow),
		allow("User:fenced", acl.Write, acl.Topic, "_schemas", "*", acl.Allow),
		allow("User:fenced", acl.Write, acl.Topic, "_schemas", "10.0.0.9", acl.Deny),
		allow("User:elsewhere", acl.Write, acl.Topic, "_schemas", "10.0.0.9", acl.Allow),
		allow("User:other", acl.Write, acl.Topic, "logs", "*", acl.Allow),
	}
	patterns := map[acl.Pattern][]acl.Entry{}
	for _, b := range bindings {
		patterns[b.Pattern] = append(patterns[b.Pattern], b.Entry)
	}
	snap := acl.NewSnapshot(patterns)
	a, err := New(Config{Users: credentials{}, ACLs: func() *acl.Snapshot { return snap },
		ACLSettings: acl.Settings{SuperUsers: []string{"User:admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	open, err := New(Config{Users: credentials{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		principal string
		op        registry.Operation
		subject   string
		want      bool
	}{
		{"User:reader", registry.OpRead, "orders-value", true}, // reads: any authenticated user
		{"User:reader", registry.OpWrite, "orders-value", false},
		{"User:reader", registry.OpDelete, "orders-value", false},
		{"User:reader", registry.OpConfig, "", false},
		{"User:writer", registry.OpWrite, "orders-value", true}, // WRITE on TOPIC _schemas
		{"User:writer", registry.OpDelete, "orders-value", true},
		{"User:writer", registry.OpConfig, "", false},
		{"User:ops", registry.OpConfig, "", true}, // ALTER_CONFIGS on CLUSTER
		{"User:ops", registry.OpConfig, "orders-value", true},
		{"User:ops", registry.OpWrite, "orders-value", false},
		{"User:admin", registry.OpWrite, "orders-value", true}, // super.users
		{"User:admin", registry.OpConfig, "", true},
		{"User:fenced", registry.OpWrite, "orders-value", false},    // a Deny of any host counts
		{"User:elsewhere", registry.OpWrite, "orders-value", false}, // an Allow counts only for host *
		{"User:other", registry.OpWrite, "orders-value", false},     // a grant on another topic
	} {
		if got := a.Authorize(c.principal, c.op, c.subject); got != c.want {
			t.Errorf("Authorize(%s, %d, %q) = %v, want %v", c.principal, c.op, c.subject, got, c.want)
		}
		// Without an authorizer every authenticated user may do everything.
		if !open.Authorize(c.principal, c.op, c.subject) {
			t.Errorf("without ACLs, Authorize(%s, %d, %q) = false", c.principal, c.op, c.subject)
		}
	}
}
