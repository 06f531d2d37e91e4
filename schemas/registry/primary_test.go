package registry

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"millrace/internal/waitfor"
)

// TestForwardToPrimary: two registries share one log; writes sent to the
// one that is not primary are forwarded (method, path, query, body and
// Authorization) and its answer relayed; reads are served from each
// registry's own view.
func TestForwardToPrimary(t *testing.T) {
	t.Parallel()
	log := NewMemoryLog()
	primary := newRegistry(t, log.Writer(), nil)
	follower := newRegistry(t, log, nil)
	follower.election.set(false, primary.http.URL)

	follower.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
	// The primary answered once its view had the write.
	primary.want(t, "GET", "/subjects/s/versions/1", "", 200, "")
	follower.want(t, "PUT", "/config/s?unused=1", `{"compatibility":"NONE"}`, 200, `{"compatibility":"NONE"}`)
	follower.want(t, "POST", "/subjects/s/versions", schemaBody(schemaC), 200, `{"id":2}`)
	// Refusals are relayed as the primary answered them.
	follower.wantError(t, "DELETE", "/subjects/s?permanent=true", "", 404, codeSubjectNotSoftDeleted)
	waitfor.Until(t, 10*time.Second, "the follower's view to have both versions", func() bool {
		status, got := follower.do(t, "GET", "/subjects/s/versions", "")
		return status == 200 && compact(t, got) == `[1,2]`
	})

	// No primary: 50003, nothing written.
	follower.election.set(false, "")
	follower.wantError(t, "POST", "/subjects/t/versions", schemaBody(schemaA), 500, codeForwardingError)
	// A forwarded write reaching a registry that is not primary (the
	// election moved) is answered 50003, not forwarded again.
	primary.election.set(false, follower.http.URL)
	follower.election.set(false, primary.http.URL)
	follower.wantError(t, "POST", "/subjects/t/versions", schemaBody(schemaA), 500, codeForwardingError)
	if end, _ := log.End(context.Background()); end != 3 {
		t.Errorf("the log holds %d records, want the 3 written", end)
	}
}

// TestFencedAppend: a registry that still believes it is primary after
// another has taken over the log gets ErrFenced; it answers 50003 and
// nothing of its write lands, so the new primary's IDs stay unique.
func TestFencedAppend(t *testing.T) {
	t.Parallel()
	log := NewMemoryLog()
	old := newRegistry(t, log.Writer(), nil)
	old.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)

	successor := newRegistry(t, log.Writer(), nil)
	msg := old.wantError(t, "POST", "/subjects/s/versions", schemaBody(schemaB), 500, codeForwardingError)
	if end, _ := log.End(context.Background()); end != 1 {
		t.Fatalf("a fenced write landed: the log holds %d records (%s)", end, msg)
	}
	successor.want(t, "POST", "/subjects/s/versions", schemaBody(schemaB), 200, `{"id":2}`)
	successor.want(t, "GET", "/subjects/s/versions", "", 200, `[1,2]`)
	waitfor.Until(t, 10*time.Second, "the old primary's view to follow", func() bool {
		status, got := old.do(t, "GET", "/schemas?deleted=true", "")
		return status == 200 && compact(t, got) == compact(t, `[
			{"subject":"s","version":1,"id":1,"schema":`+quote(schemaA)+`},
			{"subject":"s","version":2,"id":2,"schema":`+quote(schemaB)+`}]`)
	})
}

// failingLog fails Append with err and End with endErr.
type failingLog struct {
	*MemoryLog
	err, endErr error
}

func (f failingLog) Append(context.Context, []Record) (int64, error) { return 0, f.err }
func (f failingLog) End(ctx context.Context) (int64, error) {
	if f.endErr != nil {
		return 0, f.endErr
	}
	return f.MemoryLog.End(ctx)
}

// TestStoreErrors: a log that cannot be written answers 50001; a view that
// does not catch up in time answers 50002.
func TestStoreErrors(t *testing.T) {
	t.Parallel()
	broken := newRegistry(t, failingLog{MemoryLog: NewMemoryLog(), err: errors.New("disk on fire")}, nil)
	broken.wantError(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 500, codeStoreError)
	noEnd := newRegistry(t, failingLog{MemoryLog: NewMemoryLog(), endErr: errors.New("no leader")}, nil)
	noEnd.wantError(t, "PUT", "/config", `{"compatibility":"FULL"}`, 500, codeStoreError)
	// End says a record exists that Read never gives: the catch-up times out.
	behind := newRegistry(t, aheadLog{NewMemoryLog()}, func(c *Config) { c.WriteTimeout = 50 * time.Millisecond })
	behind.wantError(t, "PUT", "/mode", `{"mode":"READONLY"}`, 500, codeOperationTimeout)
}

// aheadLog reports one record more than it holds.
type aheadLog struct{ *MemoryLog }

func (a aheadLog) End(ctx context.Context) (int64, error) {
	end, err := a.MemoryLog.End(ctx)
	return end + 1, err
}

// fakeAuth knows three users by basic auth: admin may do everything,
// reader only read, writer write under "mine".
type fakeAuth struct{}

func (fakeAuth) Authenticate(r *http.Request) (string, error) {
	user, pass, ok := r.BasicAuth()
	if !ok || pass != "secret" {
		return "", errors.New("basic credentials are missing or wrong")
	}
	return user, nil
}

func (fakeAuth) Authorize(principal string, op Operation, subject string) bool {
	switch principal {
	case "admin":
		return true
	case "writer":
		return op == OpRead || (op == OpWrite && subject == "mine")
	}
	return op == OpRead
}

// TestAuth: 401 with WWW-Authenticate: Basic without credentials, 403
// (40301) for an operation not granted, on every endpoint and through
// forwarding.
func TestAuth(t *testing.T) {
	t.Parallel()
	log := NewMemoryLog()
	auth := func(c *Config) { c.Auth = fakeAuth{} }
	primary := newRegistry(t, log.Writer(), auth)
	follower := newRegistry(t, log, auth)
	follower.election.set(false, primary.http.URL)
	basic := func(user string) []string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, "secret")
		return []string{"Authorization", req.Header.Get("Authorization")}
	}

	for _, url := range []string{primary.http.URL + "/subjects", follower.http.URL + "/subjects", primary.http.URL + "/no/such/path"} {
		req, _ := http.NewRequest("GET", url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("no credentials: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	for _, c := range []struct {
		user, method, path, body string
		status                   int
	}{
		{"reader", "GET", "/subjects", "", 200},
		{"reader", "POST", "/subjects/mine/versions", schemaBody(schemaA), 403},
		{"writer", "POST", "/subjects/other/versions", schemaBody(schemaA), 403},
		{"writer", "POST", "/subjects/mine/versions", schemaBody(schemaA), 200},
		{"writer", "DELETE", "/subjects/mine", "", 403},
		{"writer", "PUT", "/config", `{"compatibility":"NONE"}`, 403},
		{"reader", "PUT", "/mode/mine", `{"mode":"READONLY"}`, 403},
		{"admin", "PUT", "/mode/mine", `{"mode":"READONLY"}`, 200},
		{"nobody", "GET", "/subjects", "", 200},
	} {
		status, got := follower.do(t, c.method, c.path, c.body, basic(c.user)...)
		if status != c.status {
			t.Errorf("%s %s %s: %d %s, want %d", c.user, c.method, c.path, status, got, c.status)
		}
		if status == 403 && compact(t, got)[:20] != `{"error_code":40301,` {
			t.Errorf("403 body %s", got)
		}
	}
	status, _ := follower.do(t, "GET", "/subjects", "", "Authorization", "Basic garbage")
	if status != 401 {
		t.Errorf("garbage credentials: %d", status)
	}
}

// TestUnknownIDCatchesUp: a registry whose view has not yet applied a
// schema registered through the primary catches up with the log before
// answering a read of its ID, so a record framed with a fresh ID is never
// refused by a lagging broker.
func TestUnknownIDCatchesUp(t *testing.T) {
	t.Parallel()
	log := NewMemoryLog()
	primary := newRegistry(t, log.Writer(), nil)
	gated := &gatedLog{MemoryLog: log, open: make(chan struct{})}
	follower := newRegistry(t, gated, nil)
	follower.election.set(false, primary.http.URL)

	primary.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
	ends := gated.ends.Load()
	got := make(chan int, 1)
	go func() {
		status, _ := follower.do(t, "GET", "/schemas/ids/1", "")
		got <- status
	}()
	// The read waits on the log's end before answering; the follower's
	// view applies the registration only now.
	waitfor.Until(t, 10*time.Second, "the read of ID 1 to ask the log's end", func() bool { return gated.ends.Load() > ends })
	close(gated.open)
	if status := <-got; status != 200 {
		t.Errorf("GET /schemas/ids/1 on the lagging registry: %d, want 200 once caught up", status)
	}
	// An ID nobody registered is still 40403 (after the same brief look).
	follower.wantError(t, "GET", "/schemas/ids/9", "", 404, codeSchemaNotFound)
}

// gatedLog holds Reads until open is closed, and counts End calls.
type gatedLog struct {
	*MemoryLog
	open chan struct{}
	ends atomic.Int64
}

func (g *gatedLog) Read(ctx context.Context, from int64) ([]Record, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.MemoryLog.Read(ctx, from)
}

func (g *gatedLog) End(ctx context.Context) (int64, error) {
	g.ends.Add(1)
	return g.MemoryLog.End(ctx)
}
