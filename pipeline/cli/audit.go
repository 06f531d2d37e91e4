package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"millrace/audit"
	"millrace/audit/reconcile"
	"millrace/sinks/store"
)

func init() {
	register("audit", "audit -b BROKERS --lake file:///PATH|s3://BUCKET/PREFIX [--since 24h] [--topic T] [--s3-endpoint URL] "+
		"[--s3-region R] [--json]   reconcile what agents accepted with what the lake holds", runAudit)
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
func runAudit(ctx context.Context, e env, args []string) error {
	f := newFlags("audit")
	brokers := f.brokers()
	lake := f.String("lake", "", "lake root the sinks land into: file:///PATH or s3://BUCKET/PREFIX")
	since := f.Duration("since", 24*time.Hour, "audit the hours from this long ago")
	topic := f.String("topic", "", "audit one data topic only")
	auditTopic := f.String("audit-topic", audit.Topic, "topic the agents and sinks publish their counts to")
	s3Endpoint := f.String("s3-endpoint", "", "S3 endpoint URL for an s3:// lake (default https://s3.amazonaws.com)")
	s3Region := f.String("s3-region", "", "S3 region (default us-east-1)")
	asJSON := f.Bool("json", false, "print the report as JSON")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	if *lake == "" {
		return usageError("--lake file:///PATH or s3://BUCKET/PREFIX is required")
	}
	if *since <= 0 {
		return usageError("--since must be positive")
	}
	s := seeds(*brokers)
	if len(s) == 0 {
		return usageError("no brokers given")
	}
	// Credentials for an s3:// lake come from AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, as for `millrace sink`.
	st, err := store.Open(ctx, *lake, store.Options{S3Endpoint: *s3Endpoint, S3Region: *s3Region})
	if err != nil {
		return err
	}
	defer st.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	r, err := reconcile.Run(rctx, reconcile.Options{Brokers: s, AuditTopic: *auditTopic, Lake: st, Topic: *topic, Since: *since})
	if err != nil {
		return err
	}
	if *asJSON {
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
