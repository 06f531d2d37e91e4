package cli

import (
	"os/exec"
	"strings"
	"testing"

	"millrace/pipeline/appliance"
)

// TestPrintSecureClient: the kcat line and the CLI flags name the files,
// quoted for the shell where a path needs it, so that the shell reads back
// exactly the paths (checked with sh itself).
func TestPrintSecureClient(t *testing.T) {
	var out strings.Builder
	sc := appliance.SecureClient{Bootstrap: "127.0.0.1:9092", CAFile: "/data dir/security/ca.pem", Mechanism: "SCRAM-SHA-512",
		Username: "admin", PasswordFile: "/data dir/it's/admin.password"}
	printSecureClient(env{stdout: &out, self: "bin/millrace"}, sc)
	text := out.String()
	for _, want := range []string{
		`kcat -b 127.0.0.1:9092 -X security.protocol=SASL_SSL -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=admin -X sasl.password="$(cat '/data dir/it'\''s/admin.password')" -X ssl.ca.location='/data dir/security/ca.pem' -L`,
		`millrace CLI             bin/millrace topic list -b 127.0.0.1:9092 --tls-ca '/data dir/security/ca.pem' --sasl-mechanism SCRAM-SHA-512 --sasl-username admin --sasl-password-file '/data dir/it'\''s/admin.password'`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks\n%s\nin\n%s", want, text)
		}
	}
	for _, s := range []string{"/plain/path.pem", "/data dir/x", "it's", "$(rm -rf /)", ""} {
		got, err := exec.Command("sh", "-c", `printf %s `+shellQuote(s)).Output()
		if err != nil || string(got) != s {
			t.Errorf("shellQuote(%q) = %s reads back as %q, %v", s, shellQuote(s), got, err)
		}
	}
}
