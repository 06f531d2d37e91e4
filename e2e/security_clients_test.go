package e2e

// millrace's own clients on a secured broker: the tailer ships and the sink
// lands through a listener that requires client certificates (SSL) or SCRAM
// users (SASL_SSL), each with the tls: and sasl: settings next to the
// brokers: of its YAML file.

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"millrace/internal/certs"
	"millrace/internal/clientauth"
	"millrace/internal/waitfor"
	"millrace/sinks/parquet"
	"millrace/sinks/parquet/parquettest"
)

func TestClientsOverTLS(t *testing.T) {
	t.Parallel()
	s := newSecureSetup(t)
	tailPEM := s.issue("tail", certs.Options{CommonName: "tail", Usage: certs.Client})
	sinkPEM := s.issue("sink", certs.Options{CommonName: "sink", Usage: certs.Client})
	b := startProcess(t, "broker", "broker", "--data", s.brokerData, "--id", "1",
		"--set", "listeners=SSL://"+s.addr, "--set", "ssl.keystore.location="+s.brokerPEM,
		"--set", "ssl.truststore.location="+s.ca.CertFile(), "--set", "ssl.client.auth=required")
	waitSecureReady(t, b, s.addr, clientauth.Settings{TLS: &clientauth.TLS{CA: s.ca.CertFile(), Cert: tailPEM}})
	s.pipeline(
		fmt.Sprintf("tls: {ca: %s, cert: %s}", s.ca.CertFile(), tailPEM),
		fmt.Sprintf("tls: {ca: %s, cert: %s}", s.ca.CertFile(), sinkPEM))
}

func TestClientsOverSASL(t *testing.T) {
	t.Parallel()
	s := newSecureSetup(t)
	// The users exist before the broker starts, in its embedded store.
	sasl := map[string]*clientauth.SASL{}
	for _, user := range []string{"tail", "sink"} {
		pass := s.writeFile(user+".password", "secret of "+user+"\n")
		run(t, 30*time.Second, "", millraceBin, "user", "add", user, "--mechanism", "SCRAM-SHA-512", "--password-file", pass, "--data", s.brokerData)
		sasl[user] = &clientauth.SASL{Mechanism: "SCRAM-SHA-512", Username: user, PasswordFile: pass}
	}
	b := startProcess(t, "broker", "broker", "--data", s.brokerData, "--id", "1",
		"--set", "listeners=SASL_SSL://"+s.addr, "--set", "ssl.keystore.location="+s.brokerPEM,
		"--set", "sasl.enabled.mechanisms=SCRAM-SHA-512")
	waitSecureReady(t, b, s.addr, clientauth.Settings{TLS: &clientauth.TLS{CA: s.ca.CertFile()}, SASL: sasl["tail"]})
	section := func(a *clientauth.SASL) string {
		return fmt.Sprintf("tls: {ca: %s}\n  sasl: {mechanism: %s, username: %s, password_file: %s}",
			s.ca.CertFile(), a.Mechanism, a.Username, a.PasswordFile)
	}
	s.pipeline(section(sasl["tail"]), section(sasl["sink"]))
}

// secureSetup is a test's directory, CA, broker keystore and broker address.
type secureSetup struct {
	t          *testing.T
	dir        string
	ca         *certs.CA
	brokerPEM  string
	brokerData string
	addr       string
}

func newSecureSetup(t *testing.T) *secureSetup {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA(filepath.Join(dir, "ca"), "millrace clients CA")
	if err != nil {
		t.Fatal(err)
	}
	s := &secureSetup{t: t, dir: dir, ca: ca, brokerData: filepath.Join(dir, "broker"),
		addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	s.brokerPEM = s.issue("broker", certs.Options{CommonName: "broker", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: certs.Server})
	return s
}

func (s *secureSetup) issue(name string, opts certs.Options) string {
	path := filepath.Join(s.dir, name+".pem")
	if _, err := s.ca.Issue(path, opts); err != nil {
		s.t.Fatal(err)
	}
	return path
}

func (s *secureSetup) writeFile(name, text string) string {
	path := filepath.Join(s.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// pipeline tails three lines to topic logs and lands them with a sink, the
// tailer's ship: and the sink's lake: sections holding the security
// settings given (YAML lines at two spaces' indent), and checks that each
// line lands once.
func (s *secureSetup) pipeline(tailSecurity, sinkSecurity string) {
	t := s.t
	t.Helper()
	logFile := s.writeFile("logs/app.log", "one\ntwo\nthree\n")
	tailCfg := s.writeFile("tail.yaml", fmt.Sprintf(`
ship:
  brokers: [%s]
  %s
tail:
  start_position: beginning
  poll_interval: 100ms
`, s.addr, tailSecurity))
	startProcess(t, "tail", "tail", "--topic", "logs", "--data", filepath.Join(s.dir, "tail"), "--config", tailCfg,
		"--log-level", "warn", logFile)

	root := filepath.Join(s.dir, "lake")
	sinkCfg := s.writeFile("sink.yaml", fmt.Sprintf(`
out: file://%s
lake:
  brokers: [%s]
  %s
  group: secure-sink
  topics: [logs]
  schema: log
  idle_timeout: 300ms
  session_timeout: 6s
`, root, s.addr, sinkSecurity))
	sink := startProcess(t, "sink", "sink", "--config", sinkCfg, "--log-level", "warn")

	var lines []string
	defer reportLastSeen(t, func() string { return fmt.Sprintf("landed %v", lines) })()
	waitfor.Until(t, 60*time.Second, "three lines landed", func() bool {
		files, _ := filepath.Glob(filepath.Join(root, "logs", "dt=*", "hr=*", "*.parquet"))
		lines = lines[:0]
		for _, f := range files {
			rows, err := parquet.ReadRows[parquettest.LogRow](f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				lines = append(lines, r.Line)
			}
		}
		if len(lines) < 3 {
			sink.exitedEarly("landing three lines")
		}
		return len(lines) >= 3
	})
	slices.Sort(lines)
	if !slices.Equal(lines, []string{"one", "three", "two"}) {
		t.Errorf("landed lines %q, want one, two, three once each", lines)
	}
}

// waitSecureReady waits until a client with the settings gets an answer
// from addr.
func waitSecureReady(t *testing.T, p *process, addr string, security clientauth.Settings) {
	t.Helper()
	opts, err := security.Opts()
	if err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, p, addr, opts...)
}
