package kafka

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"millrace/broker/users"
	"millrace/internal/waitfor"
)

// saslConn serves one connection of tb's broker over a pipe as if it came
// in on a SASL_PLAINTEXT listener, and returns the client end.
func saslConn(t *testing.T, tb *testBroker) (*rawClient, *conn) {
	t.Helper()
	client, server := net.Pipe()
	c := newConn(tb.broker, server)
	c.protocol = protocolSASLPlaintext
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serve()
	}()
	t.Cleanup(func() {
		client.Close()
		c.close("test over")
		<-done
	})
	return &rawClient{t: t, nc: client}, c
}

// addUser stores a credential per SCRAM mechanism and waits for the
// broker's cache to have them.
func addUser(t *testing.T, tb *testBroker, user, password string) {
	t.Helper()
	for _, m := range users.Mechanisms {
		cred, err := users.NewCredential(m, password, users.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := users.Upsert(tb.store, user, cred); err != nil {
			t.Fatal(err)
		}
	}
	sc := tb.broker.sasl
	if sc == nil {
		t.Fatal("no SASL component")
	}
	waitfor.Until(t, 5*time.Second, "the cache has the user", func() bool {
		c, ok := sc.cache.Lookup(user, users.SCRAMSHA512)
		return ok && c.Verify(password)
	})
}

func mechanismFor(name, user, password string) sasl.Mechanism {
	switch name {
	case mechanismPlain:
		return plain.Auth{User: user, Pass: password}.AsMechanism()
	case users.SCRAMSHA256:
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	}
	return scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
}

// authenticate runs a handshake (v1) and the exchange with SaslAuthenticate
// at version; it returns the last response (an error code in it ends the
// exchange).
func authenticate(t *testing.T, c *rawClient, m sasl.Mechanism, version int16, correlation *int32) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = m.Name()
	*correlation++
	if resp := c.roundTrip(hs, *correlation).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake %s: error %d", m.Name(), resp.ErrorCode)
	}
	session, msg, err := m.Authenticate(testContext(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(version)
		req.SASLAuthBytes = msg
		*correlation++
		resp := c.roundTrip(req, *correlation).(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			return resp
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			t.Fatalf("%s: the broker's message: %v", m.Name(), err)
		}
		if done {
			return resp
		}
		msg = next
	}
}

// metadataOK asserts that a Metadata request is served.
func metadataOK(t *testing.T, c *rawClient, correlation int32) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	if resp := c.roundTrip(req, correlation).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
		t.Fatalf("metadata lists %d brokers", len(resp.Brokers))
	}
}

func metadataFrame(correlation int32) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	return frame(req, correlation)
}

func TestSASLRequiredBeforeOtherRequests(t *testing.T) {
	tb := startBroker(t)
	c, _ := saslConn(t, tb)
	c.apiVersionsOK(1)
	c.send(metadataFrame(2))
	c.expectClosed()
	if !strings.Contains(tb.logOut.String(), "before SASL authentication") {
		t.Fatal("the close is not logged")
	}
}

// TestSASLUnauthenticatedFrameLimit: before authentication only a frame up
// to sasl.server.max.receive.size is read; after it, a larger one is served.
func TestSASLUnauthenticatedFrameLimit(t *testing.T) {
	tb := startBroker(t)
	addUser(t, tb, "alice", "wonder land")
	// A size prefix over the limit, and nothing after it: the broker must
	// close without waiting for the bytes.
	over := binary.BigEndian.AppendUint32(nil, uint32(tb.broker.cfg.SASL.ServerMaxReceiveSize)+1)
	c, _ := saslConn(t, tb)
	c.send(over)
	c.expectClosed()
	if !strings.Contains(tb.logOut.String(), "larger than sasl.server.max.receive.size") {
		t.Fatal("the close is not logged")
	}

	c, _ = saslConn(t, tb)
	var correlation int32
	if resp := authenticate(t, c, mechanismFor(users.SCRAMSHA512, "alice", "wonder land"), 2, &correlation); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: error %d", resp.ErrorCode)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	big := kmsg.NewMetadataRequestTopic()
	big.Topic = kmsg.StringPtr(strings.Repeat("t", 30000))
	for range 20 { // 600 KB, over the limit
		req.Topics = append(req.Topics, big)
	}
	if _, ok := c.roundTrip(req, correlation+1).(*kmsg.MetadataResponse); !ok {
		t.Fatal("a large request after authentication was not answered")
	}
}

func TestSASLMechanisms(t *testing.T) {
	tb := startBroker(t)
	addUser(t, tb, "alice", "wonder land")
	for _, mech := range saslMechanisms {
		for _, version := range []int16{0, 1, 2} {
			c, sc := saslConn(t, tb)
			var correlation int32
			resp := authenticate(t, c, mechanismFor(mech, "alice", "wonder land"), version, &correlation)
			if resp.ErrorCode != 0 {
				t.Fatalf("%s v%d: error %d %v", mech, version, resp.ErrorCode, resp.ErrorMessage)
			}
			if resp.SessionLifetimeMillis != 0 {
				t.Fatalf("%s: session lifetime %d without connections.max.reauth.ms", mech, resp.SessionLifetimeMillis)
			}
			metadataOK(t, c, correlation+1)
			if sc.principal != "User:alice" {
				t.Fatalf("%s: principal %q", mech, sc.principal)
			}
		}
	}
}

func TestSASLWrongPassword(t *testing.T) {
	reg := prometheus.NewRegistry()
	tb := startBroker(t, withMetrics(reg), withConfig(func(c *Config) { c.SASL.FailedAuthenticationDelay = 50 * time.Millisecond }))
	addUser(t, tb, "bob", "right")
	for i, mech := range saslMechanisms {
		for _, user := range []string{"bob", "nobody"} {
			c, sc := saslConn(t, tb)
			var correlation int32
			start := time.Now()
			resp := authenticate(t, c, mechanismFor(mech, user, "wrong-pass"), 1, &correlation)
			if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage == "" {
				t.Fatalf("%s %s: error %d %v", mech, user, resp.ErrorCode, resp.ErrorMessage)
			}
			if took := time.Since(start); took < 50*time.Millisecond {
				t.Fatalf("%s: failure answered after %v, before connection.failed.authentication.delay.ms", mech, took)
			}
			if sc.principal != anonymous {
				t.Fatalf("principal %q after a failure", sc.principal)
			}
			c.send(metadataFrame(correlation + 1))
			c.expectClosed()
		}
		if n := testutil.ToFloat64(tb.broker.metrics.saslAuth.WithLabelValues(mech, "failed")); n != 2 {
			t.Fatalf("%s: %v failures counted (case %d)", mech, n, i)
		}
	}
	logs := tb.logOut.String()
	if !strings.Contains(logs, "SASL authentication failed") || !strings.Contains(logs, "user=bob") || !strings.Contains(logs, "client=pipe") {
		t.Fatalf("no failure line naming the client and user:\n%s", logs)
	}
	if strings.Contains(logs, "wrong-pass") {
		t.Fatal("the password is logged")
	}
}

func TestSASLHandshakeErrors(t *testing.T) {
	tb := startBroker(t)
	c, _ := saslConn(t, tb)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "GSSAPI"
	resp := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("GSSAPI: error %d, offered %v", resp.ErrorCode, resp.SupportedMechanisms)
	}
	// SaslAuthenticate before any handshake.
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	if resp := c.roundTrip(auth, 2).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate without handshake: error %d", resp.ErrorCode)
	}

	// A listener without SASL answers ILLEGAL_SASL_STATE.
	plainConn := dial(t, tb.addr)
	hs.Mechanism = mechanismPlain
	if resp := plainConn.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake on PLAINTEXT: error %d", resp.ErrorCode)
	}
	metadataOK(t, plainConn, 2)
}

// TestSASLOversizedMessage: a SASL message beyond the bound fails the
// authentication without being parsed.
func TestSASLOversizedMessage(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.SASL.FailedAuthenticationDelay = 0 }))
	c, _ := saslConn(t, tb)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = users.SCRAMSHA256
	c.roundTrip(hs, 1)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	auth.SASLAuthBytes = []byte("n,,n=" + strings.Repeat("u", maxSASLMessageBytes) + ",r=abc")
	if resp := c.roundTrip(auth, 2).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("oversized: error %d", resp.ErrorCode)
	}
}

// TestSASLRawFrames: after a version 0 handshake the exchange travels as
// raw size-prefixed frames (kafka-python 2.0's flow), including a PLAIN
// message shorter than a request header; a failure closes the connection.
func TestSASLRawFrames(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.SASL.FailedAuthenticationDelay = 0 }))
	addUser(t, tb, "k", "p")
	for _, tc := range []struct {
		mech, password string
		ok             bool
	}{{users.SCRAMSHA256, "p", true}, {mechanismPlain, "p", true}, {users.SCRAMSHA512, "x", false}, {mechanismPlain, "x", false}} {
		c, _ := saslConn(t, tb)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(0)
		hs.Mechanism = tc.mech
		if resp := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
			t.Fatalf("v0 handshake: %d", resp.ErrorCode)
		}
		session, msg, err := mechanismFor(tc.mech, "k", tc.password).Authenticate(testContext(t), "")
		if err != nil {
			t.Fatal(err)
		}
		for {
			raw := binary.BigEndian.AppendUint32(nil, uint32(len(msg)))
			c.send(append(raw, msg...))
			if !tc.ok && (tc.mech == mechanismPlain || strings.HasPrefix(string(msg), "c=")) {
				c.expectClosed()
				break
			}
			reply := readRaw(t, c)
			done, next, err := session.Challenge(reply)
			if err != nil {
				t.Fatal(err)
			}
			if done {
				break
			}
			msg = next
		}
		if tc.ok {
			metadataOK(t, c, 2)
		}
	}
}

func readRaw(t *testing.T, c *rawClient) []byte {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSASLReauthentication (KIP-368): the session lifetime is reported, a
// re-authentication as the same user extends it, one as another user fails,
// and a connection whose session ended is closed at its next request.
func TestSASLReauthentication(t *testing.T) {
	const lifetime = 300 * time.Millisecond
	tb := startBroker(t, withConfig(func(c *Config) {
		c.SASL.ConnectionsMaxReauth = lifetime
		c.SASL.FailedAuthenticationDelay = 0
	}))
	addUser(t, tb, "r", "pw")
	addUser(t, tb, "other", "pw")

	c, _ := saslConn(t, tb)
	var correlation int32
	first := time.Now()
	resp := authenticate(t, c, mechanismFor(users.SCRAMSHA512, "r", "pw"), 1, &correlation)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 0 || resp.SessionLifetimeMillis > lifetime.Milliseconds() {
		t.Fatalf("error %d, lifetime %d", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	// The sessions' lifetimes are wall-clock time: the test lets it pass.
	time.Sleep(lifetime / 2)
	if resp := authenticate(t, c, mechanismFor(users.SCRAMSHA512, "r", "pw"), 2, &correlation); resp.ErrorCode != 0 {
		t.Fatalf("re-authentication: error %d", resp.ErrorCode)
	}
	// Past the first session's end, inside the second's.
	time.Sleep(time.Until(first.Add(lifetime + lifetime/4)))
	correlation++
	metadataOK(t, c, correlation)
	// Past the second session's end.
	time.Sleep(lifetime)
	correlation++
	c.send(metadataFrame(correlation))
	c.expectClosed()

	c2, _ := saslConn(t, tb)
	correlation = 0
	authenticate(t, c2, mechanismFor(users.SCRAMSHA512, "r", "pw"), 1, &correlation)
	if resp := authenticate(t, c2, mechanismFor(users.SCRAMSHA512, "other", "pw"), 1, &correlation); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as another user: error %d", resp.ErrorCode)
	}
	c2.send(metadataFrame(correlation + 1))
	c2.expectClosed()
}

// TestUserSCRAMCredentialAPIs: kadm creates, describes and deletes
// credentials; a credential made through the API authenticates; Kafka's
// errors for bad requests.
func TestUserSCRAMCredentialAPIs(t *testing.T) {
	tb := startBroker(t)
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "c-pass"},
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "c-pass"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := altered["carol"].Err; err != nil {
		t.Fatalf("carol: %v", err)
	}

	described, err := adm.DescribeUserSCRAMs(ctx, "carol", "dave")
	if err != nil {
		t.Fatal(err)
	}
	if cs := described["carol"].CredInfos; described["carol"].Err != nil || len(cs) != 2 || cs[0].Mechanism != kadm.ScramSha256 || cs[1].Iterations != 8192 {
		t.Fatalf("carol: %+v", described["carol"])
	}
	if described["dave"].Err != kerr.ResourceNotFound {
		t.Fatalf("dave: %v", described["dave"].Err)
	}
	all, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("all users: %v, %v", all, err)
	}

	// The credential made through the API authenticates on a SASL
	// connection, through the cache.
	sc := tb.broker.sasl
	waitfor.Until(t, 5*time.Second, "the cache has carol", func() bool { _, ok := sc.cache.Lookup("carol", users.SCRAMSHA512); return ok })
	c, _ := saslConn(t, tb)
	var correlation int32
	if resp := authenticate(t, c, mechanismFor(users.SCRAMSHA512, "carol", "c-pass"), 1, &correlation); resp.ErrorCode != 0 {
		t.Fatalf("carol authenticates: %d", resp.ErrorCode)
	}

	// Raw requests for what kadm does not send: duplicates, unknown
	// deletions, unknown mechanisms.
	raw := dial(t, tb.addr)
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "carol", 1
	req.Deletions = append(req.Deletions, del, del)
	missing := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	missing.Name, missing.Mechanism = "zed", 2
	unknown := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	unknown.Name, unknown.Mechanism = "yan", 7
	req.Deletions = append(req.Deletions, missing, unknown)
	// kadm refuses these iteration counts itself.
	for name, iterations := range map[string]int32{"dave": 4095, "erin": 16385} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations = name, 1, iterations
		up.Salt, up.SaltedPassword = []byte("salt"), make([]byte, 32)
		req.Upsertions = append(req.Upsertions, up)
	}
	resp := raw.roundTrip(req, 1).(*kmsg.AlterUserSCRAMCredentialsResponse)
	want := map[string]int16{"carol": kerr.DuplicateResource.Code, "zed": kerr.ResourceNotFound.Code, "yan": kerr.UnsupportedSaslMechanism.Code, "dave": kerr.UnacceptableCredential.Code, "erin": kerr.UnacceptableCredential.Code}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results", len(resp.Results))
	}
	for _, r := range resp.Results {
		if r.ErrorCode != want[r.User] {
			t.Fatalf("%s: error %d, want %d", r.User, r.ErrorCode, want[r.User])
		}
	}
	// The duplicate applied nothing: carol keeps both credentials.
	if d, _ := adm.DescribeUserSCRAMs(ctx, "carol"); len(d["carol"].CredInfos) != 2 {
		t.Fatalf("carol after a refused request: %+v", d["carol"])
	}
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
	u.Name = "carol"
	dreq.Users = append(dreq.Users, u, u)
	if d := raw.roundTrip(dreq, 2).(*kmsg.DescribeUserSCRAMCredentialsResponse); len(d.Results) != 1 || d.Results[0].ErrorCode != kerr.DuplicateResource.Code {
		t.Fatalf("duplicate describe: %+v", d.Results)
	}

	deleted, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}, {User: "carol", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || deleted["carol"].Err != nil {
		t.Fatalf("delete: %v %v", err, deleted["carol"].Err)
	}
	if d, _ := adm.DescribeUserSCRAMs(ctx, "carol"); d["carol"].Err != kerr.ResourceNotFound {
		t.Fatalf("carol after deletion: %+v", d["carol"])
	}
}

// FuzzSASLExchange feeds a mechanism two client messages (split at the
// first 0xff byte): whatever they hold, the exchange answers or fails
// without panicking, and it never authenticates anyone without the
// password.
func FuzzSASLExchange(f *testing.F) {
	f.Add(byte(0), []byte("\x00admin\x00guess"))
	f.Add(byte(1), []byte("n,,n=admin,r=abc\xffc=biws,r=abc,p=AAAA"))
	f.Add(byte(2), []byte("n,a=admin,n=admin,r=x\xffc=biws,r=xx,p="))
	tb := startBroker(f)
	for _, m := range users.Mechanisms {
		cred, _ := users.NewCredential(m, "the password", users.MinIterations)
		if err := users.Upsert(tb.store, "admin", cred); err != nil {
			f.Fatal(err)
		}
	}
	sc := tb.broker.sasl
	waitfor.Until(f, 5*time.Second, "the user in the credential cache", func() bool {
		_, ok := sc.cache.Lookup("admin", users.SCRAMSHA256)
		return ok
	})
	f.Fuzz(func(t *testing.T, mechanism byte, data []byte) {
		c := &conn{b: tb.broker, protocol: protocolSASLPlaintext, principal: anonymous}
		c.sasl.mechanism = saslMechanisms[int(mechanism)%len(saslMechanisms)]
		first, second, two := bytes.Cut(data, []byte{0xff})
		_, _, done, err := c.saslExchange(first)
		if err == nil && !done && two {
			_, _, done, err = c.saslExchange(second)
		}
		if err == nil && done {
			t.Fatalf("%s authenticated with %q", c.sasl.mechanism, data)
		}
	})
}

// TestUserSCRAMCredentialAuthorization: with an authorizer on, describing
// and altering credentials needs Describe and Alter on the cluster: a
// super user may, an authenticated user without ACLs may not.
func TestUserSCRAMCredentialAuthorization(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) {
		c.Authorizer.ClassName = "kafka.security.authorizer.AclAuthorizer"
		c.Authorizer.SuperUsers = "User:admin"
	}))
	addUser(t, tb, "admin", "a")
	addUser(t, tb, "mallory", "m")
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "mallory", 1, 4096, []byte("salt"), make([]byte, 32)
	alter.Upsertions = append(alter.Upsertions, up)
	describe := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for user, want := range map[string]int16{"mallory": kerr.ClusterAuthorizationFailed.Code, "admin": 0} {
		c, _ := saslConn(t, tb)
		var correlation int32
		if resp := authenticate(t, c, mechanismFor(users.SCRAMSHA512, user, map[string]string{"admin": "a", "mallory": "m"}[user]), 1, &correlation); resp.ErrorCode != 0 {
			t.Fatalf("%s: authentication error %d", user, resp.ErrorCode)
		}
		if d := c.roundTrip(describe, correlation+1).(*kmsg.DescribeUserSCRAMCredentialsResponse); d.ErrorCode != want {
			t.Fatalf("%s describes: error %d, want %d", user, d.ErrorCode, want)
		}
		if a := c.roundTrip(alter, correlation+2).(*kmsg.AlterUserSCRAMCredentialsResponse); len(a.Results) != 1 || a.Results[0].ErrorCode != want {
			t.Fatalf("%s alters: %+v, want error %d", user, a.Results, want)
		}
	}
}
