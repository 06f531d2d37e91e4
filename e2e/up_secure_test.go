package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"millrace/pipeline/appliance"
)

// TestUpSecure runs `millrace up` with security: on. Tail and beacon events
// land in the lake, each component having authenticated as its own user
// (the broker's log names every one) with no authorization refused; the
// printed kcat line lists the broker's metadata as admin; a PLAINTEXT client
// and a TLS client without SASL get nothing; the tail user cannot read the
// clicks topic the sink user reads, nor write it; a restart reuses the CA
// and the passwords and lands more; the console answers 401 without the
// generated token and 200 with it, and shows the broker and topics in
// Chromium after the token login.
func TestUpSecure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "app", "service.log")
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		t.Fatal(err)
	}
	var registryAddr string
	cfgPath, kafkaAddr, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		registryAddr = cfg.SchemaRegistry.Listen
		cfg.Secure = true
		cfg.Demo.WriteLog = ""
		cfg.Tail[0].Paths = []string{logFile}
		cfg.Tail[0].ScanFrequency = 200 * time.Millisecond
		cfg.Sinks = cfg.Sinks[:2] // clicks and logs
		for i := range cfg.Sinks {
			cfg.Sinks[i].RollAge, cfg.Sinks[i].IdleTimeout = 2*time.Second, time.Second
		}
	})
	// Debug: the broker logs each successful SASL authentication with its user.
	up := startProcess(t, "up", "up", "--config", cfgPath, "--log-level", "debug")
	web := "http://" + webAddr
	waitHTTP(t, up, web+"/healthz")
	up.waitLog("Stop with Ctrl-C", 1, 30*time.Second)
	secDir := filepath.Join(dir, "data", appliance.SecurityDirName)
	caFile := filepath.Join(secDir, "ca.pem")
	adminPasswordFile := filepath.Join(secDir, appliance.AdminUser+appliance.PasswordFileSuffix)
	banner := up.log()
	for _, want := range []string{caFile, adminPasswordFile, "--tls-ca " + caFile, "--sasl-mechanism SCRAM-SHA-512 --sasl-username admin", "MILLRACE_SASL_PASSWORD"} {
		if !strings.Contains(banner, want) {
			t.Fatalf("the banner lacks %q:\n%s", want, banner)
		}
	}
	password := func(user string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(secDir, user+appliance.PasswordFileSuffix))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if strings.Contains(banner, password(appliance.AdminUser)) {
		t.Fatal("the banner shows admin's password")
	}

	// The printed kcat line, run as printed.
	m := regexp.MustCompile(`(?m)^\s+kcat\s+(kcat .*)$`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no kcat line in the banner:\n%s", banner)
	}
	out := run(t, time.Minute, "", "bash", "-c", m[1])
	if !strings.Contains(out, "1 brokers:") || !strings.Contains(out, `topic "clicks"`) {
		t.Fatalf("the printed kcat line listed:\n%s", out)
	}

	// And the printed millrace CLI line, run as printed: it names the
	// binary by the path it was started by (millrace is not on PATH here).
	m = regexp.MustCompile(`(?m)^\s+millrace CLI\s+(\S+) (topic list .*)$`).FindStringSubmatch(banner)
	if m == nil || m[1] != millraceBin {
		t.Fatalf("no millrace CLI line naming %s in the banner:\n%s", millraceBin, banner)
	}
	if out := run(t, time.Minute, "", "bash", "-c", m[1]+" "+m[2]); !strings.Contains(out, "clicks") {
		t.Fatalf("the printed millrace line listed:\n%s", out)
	}

	// The schema registry is HTTPS with basic auth on the broker's users:
	// no credentials is 401, a component's user may read but not write,
	// admin registers (the millrace schema command, as docs/schemas.md
	// says to point it).
	registry := "https://" + registryAddr
	schemaCmd := func(user string, args ...string) (string, string, error) {
		cmd := exec.Command(millraceBin, append(append([]string{"schema"}, args...),
			"--registry", registry, "--registry-ca", caFile, "--registry-user", user)...)
		cmd.Env = append(os.Environ(), "MILLRACE_SCHEMA_REGISTRY_PASSWORD="+password(user))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	avsc := filepath.Join(dir, "click.avsc")
	if err := os.WriteFile(avsc, []byte(`{"type":"record","name":"Click","fields":[{"name":"url","type":"string"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := schemaCmd(appliance.AdminUser, "register", "clicks-value", "--file", avsc); err != nil {
		t.Fatalf("admin registers a schema: %v\n%s%s", err, out, stderr)
	}
	if out, _, err := schemaCmd(appliance.BeaconUser, "list"); err != nil || strings.TrimSpace(out) != "clicks-value" {
		t.Errorf("the beacon's user lists subjects: %v %q, want clicks-value", err, out)
	}
	if _, stderr, err := schemaCmd(appliance.BeaconUser, "delete", "clicks-value"); err == nil || !strings.Contains(stderr, "not authorized") {
		t.Errorf("the beacon's user deletes a subject: %v %q, want refused as not authorized", err, stderr)
	}
	registryCA, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	registryRoots := x509.NewCertPool()
	registryRoots.AppendCertsFromPEM(registryCA)
	anonymous := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: registryRoots}}}
	if resp, err := anonymous.Get(registry + "/subjects"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /subjects without credentials: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	// Events from the beacon and the tailer land once.
	postClicks(t, web, 0, 20)
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		fmt.Fprintf(f, "%s INFO line %d of the service\n", time.Now().UTC().Format(time.RFC3339Nano), i)
	}
	f.Close()
	lake := filepath.Join(dir, "data", "lake")
	waitForRows(t, lake+"/clicks/**/*.parquet", 20, 60*time.Second)
	waitForLines(t, lake, logFile, 30, 60*time.Second)
	checkDistinct(t, lake+"/clicks/**/*.parquet", "title", 20)
	checkLines(t, lake, logFile, 30)

	// Every component authenticated as its own user, and none was refused.
	for _, u := range []string{appliance.TailUser, appliance.BeaconUser, appliance.SinkUser, appliance.ConsoleUser, appliance.AdminUser} {
		if !regexp.MustCompile(`msg="SASL authenticated" .*user=` + u + `\b`).MatchString(up.log()) {
			t.Errorf("the broker logged no authentication of %s", u)
		}
	}
	for _, refused := range []string{"AUTHORIZATION_FAILED", "authorization denied", "SASL authentication failed", "could not create"} {
		if strings.Contains(up.log(), refused) {
			t.Errorf("the log has %q: a component lacks a credential or an ACL:\n%s", refused, linesWith(up.log(), refused, 10))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: roots})
	client := func(opts ...kgo.Opt) *kgo.Client {
		// Fetch v12 names topics, so a raw Fetch needs no topic ID.
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(kafkaAddr), kgo.MaxVersions(kversion.V2_8_0()), kgo.RequestRetries(0))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	as := func(user string) *kgo.Client {
		return client(tlsOpt, kgo.SASL(scram.Auth{User: user, Pass: password(user)}.AsSha512Mechanism()))
	}

	t.Run("unauthenticated clients get nothing", func(t *testing.T) {
		for name, cl := range map[string]*kgo.Client{"PLAINTEXT": client(), "TLS without SASL": client(tlsOpt)} {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
			rcancel()
			if err == nil {
				t.Errorf("%s: Metadata answered", name)
			}
		}
	})

	t.Run("the tail user cannot read or write clicks; the sink user reads it", func(t *testing.T) {
		fetch := func(cl *kgo.Client) int16 {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "clicks"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 1<<20, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("Fetch answered %+v", resp)
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
		tail := as(appliance.TailUser)
		if code := fetch(tail); code != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("the tail user's Fetch of clicks: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		if code := fetch(as(appliance.SinkUser)); code != 0 {
			t.Errorf("the sink user's Fetch of clicks: %v", kerr.ErrorForCode(code))
		}
		err := tail.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Value: []byte(`{}`)}).FirstErr()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("the tail user producing to clicks: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})

	t.Run("a restart reuses the CA and the passwords", func(t *testing.T) {
		before := readDir(t, secDir)
		if !up.stop(syscall.SIGTERM, 60*time.Second) || up.exitCode() != 0 {
			t.Fatalf("millrace up did not stop cleanly on SIGTERM:\n%s", tail([]byte(up.log()), 4096))
		}
		up.start()
		up.waitLog("Stop with Ctrl-C", 2, 30*time.Second)
		if !strings.Contains(up.log(), "ACLs on (made now: false)") {
			t.Errorf("the second start made its security files again:\n%s", linesWith(up.log(), "ACLs on", 2))
		}
		after := readDir(t, secDir)
		if len(after) != len(before) {
			t.Errorf("the security directory held %d files, now %d", len(before), len(after))
		}
		for name, b := range before {
			if !bytes.Equal(after[name], b) {
				t.Errorf("%s changed on restart", name)
			}
		}
		postClicks(t, web, 20, 30)
		waitForRows(t, lake+"/clicks/**/*.parquet", 30, 60*time.Second)
		checkDistinct(t, lake+"/clicks/**/*.parquet", "title", 30)
	})

	t.Run("the console needs the token", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(dir, "data", appliance.TokenFileName))
		if err != nil {
			t.Fatal(err)
		}
		token := strings.TrimSpace(string(raw))
		for bearer, want := range map[string]int{"": http.StatusUnauthorized, token: http.StatusOK} {
			req, err := http.NewRequest("GET", web+"/console/api/snapshot", nil)
			if err != nil {
				t.Fatal(err)
			}
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("console with token %v: %d, want %d", bearer != "", resp.StatusCode, want)
			}
		}
		// In Chromium, with the data it reads as millrace-console over
		// SASL_SSL.
		consoleInBrowser(t, web+"/console?token="+token, web, kafkaAddr)
	})
}

// readDir is every file of dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// linesWith is up to n lines of log that contain s.
func linesWith(log, s string, n int) string {
	var out []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, s) && len(out) < n {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
