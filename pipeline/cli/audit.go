package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"millrace/audit"
	"millrace/audit/reconcile"
	"millrace/sinks/store"
)

func init() {
	addCommand("", auditCommand)
}

func auditCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit -b BROKERS --lake file:///PATH|s3://BUCKET/PREFIX [--since 24h] [--topic T] [--s3-endpoint URL] [--s3-region R] [--json]",
		Short: "reconcile what agents accepted with what the lake holds",
		Args:  exactArgs(0),
	}
	f := cmd.Flags()
	var o auditOptions
	f.StringVar(&o.lake, "lake", "", "lake root the sinks land into: file:///PATH or s3://BUCKET/PREFIX")
	f.DurationVar(&o.since, "since", 24*time.Hour, "audit the hours from this long ago")
	f.StringVarP(&o.topic, "topic", "t", "", "audit one data topic only")
	f.StringVar(&o.auditTopic, "audit-topic", audit.Topic, "topic the agents and sinks publish their counts to")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for an s3:// lake (default https://s3.amazonaws.com)")
	f.StringVar(&o.s3Region, "s3-region", "", "S3 region (default us-east-1)")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runAudit(cmd.Context(), e, o) }
	return cmd
}

// auditOptions are the flags of audit.
type auditOptions struct {
	lake, topic, auditTopic, s3Endpoint, s3Region string
	since                                         time.Duration
	asJSON                                        bool
}

// errNotReconciled is returned when some complete hour does not add up; the
// exit status is then 1, for cron.
type errNotReconciled struct{ hours int }

func (e errNotReconciled) Error() string {
	return fmt.Sprintf("%d hours do not reconcile (see the lines marked MISMATCH)", e.hours)
}

// runAudit reads _millrace.audit from its start and the lake's footers and
// _SUCCESS markers, prints one line per topic, source and hour, and fails
// when a complete hour does not reconcile.
func runAudit(ctx context.Context, e *env, o auditOptions) error {
	if o.lake == "" {
		return usageError("--lake file:///PATH or s3://BUCKET/PREFIX is required")
	}
	if o.since <= 0 {
		return usageError("--since must be positive")
	}
	s := e.client.seeds()
	if len(s) == 0 {
		return usageError("no brokers given")
	}
	security, err := e.client.settings()
	if err != nil {
		return err
	}
	// Credentials for an s3:// lake come from AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, as for `millrace sink`.
	st, err := store.Open(ctx, o.lake, store.Options{S3Endpoint: o.s3Endpoint, S3Region: o.s3Region})
	if err != nil {
		return err
	}
	defer st.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	r, err := reconcile.Run(rctx, reconcile.Options{Brokers: s, Security: security, AuditTopic: o.auditTopic, Lake: st, Topic: o.topic, Since: o.since})
	if err != nil {
		return err
	}
	if o.asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = r.WriteText(e.stdout)
	}
	if err != nil {
		return err
	}
	if r.Unreconciled > 0 {
		return errNotReconciled{r.Unreconciled}
	}
	return nil
}
