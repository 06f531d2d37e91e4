package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"millrace/audit"
	"millrace/pipeline/reconcile"
	"millrace/store"
)

func init() {
	addCommand("", auditCommand)
}

func auditCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit -b BROKERS [--lake DIR|file:///PATH|s3://BUCKET/PREFIX] [--since 24h] [--topic T] [--json] [--catalog sqlite|postgres|rest] [--catalog-uri URI] [--namespace NS]",
		Short: "reconcile what agents accepted with what the lake holds",
		Long: `Reconcile, per topic, source and hour, what the agents accepted with what
the sinks landed in the lake. Without --lake, every lake a sink announced is
audited. A topic landed as an Iceberg table (format: iceberg) is reconciled
against the rows of the table's current snapshot, found in the lake
directory's catalog.db or the catalog --catalog names. Exit status: 0 when every complete hour adds up (open and unknown
hours included), 1 when an hour does not reconcile or a topic agents feed is
landed by no sink, 2 for a wrong call, 3 when the audit could not run.`,
		Args: exactArgs(0),
	}
	f := cmd.Flags()
	var o auditOptions
	f.StringVar(&o.lake, "lake", "", "lake to audit: a directory, file:///PATH or s3://BUCKET/PREFIX (default: every lake a sink announced)")
	f.DurationVar(&o.since, "since", 24*time.Hour, "audit the hours from this long ago")
	f.StringVarP(&o.topic, "topic", "t", "", "audit one data topic only")
	f.StringVar(&o.auditTopic, "audit-topic", audit.Topic, "topic the agents and sinks publish their counts to")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for an s3:// lake (default https://s3.amazonaws.com)")
	f.StringVar(&o.s3Region, "s3-region", "", "S3 region (default us-east-1)")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON (one object per lake)")
	o.tables.add(f)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runAudit(cmd.Context(), e, o) }
	return cmd
}

// auditOptions are the flags of audit.
type auditOptions struct {
	lake, topic, auditTopic, s3Endpoint, s3Region string
	since                                         time.Duration
	asJSON                                        bool
	tables                                        tableFlags
}

// errNotReconciled is returned when some complete hour does not add up or
// a topic is landed by no sink; the exit status is then 1, for cron.
type errNotReconciled struct{ hours, notLanded int }

func (e errNotReconciled) Error() string {
	return fmt.Sprintf("%d hours do not reconcile and %d topics are not landed (see the lines above)", e.hours, e.notLanded)
}

func (errNotReconciled) ExitCode() int { return 1 }

// errAuditFailed is an audit that could not run (brokers or lake out of
// reach): exit status 3, so that monitoring tells it from a finding.
type errAuditFailed struct{ err error }

func (e errAuditFailed) Error() string { return "the audit could not run: " + e.err.Error() }
func (e errAuditFailed) Unwrap() error { return e.err }
func (errAuditFailed) ExitCode() int   { return 3 }

// runAudit reads _millrace.audit from its start and the lakes' footers and
// _SUCCESS markers, prints one line per topic, source and hour, and fails
// when a complete hour does not reconcile or a topic is not landed.
func runAudit(ctx context.Context, e *env, o auditOptions) error {
	if o.since <= 0 {
		return usageError("--since must be positive")
	}
	s := e.client.seeds()
	if len(s) == 0 {
		return usageError("no brokers given")
	}
	var lakes []string
	if o.tables.given() && o.lake == "" {
		return usageError("--catalog and its settings are for the lake --lake names")
	}
	if o.lake != "" {
		url, err := store.CanonicalURL(o.lake)
		if err != nil {
			return usageError("--lake: %v", err)
		}
		if o.tables.given() && !strings.HasPrefix(url, "file://") {
			return usageError("--catalog: tables are read from a warehouse directory; %s is not one", url)
		}
		lakes = []string{url}
	}
	security, err := e.client.settings()
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	a, err := reconcile.Load(rctx, reconcile.Options{Brokers: s, Security: security, AuditTopic: o.auditTopic, Topic: o.topic, Since: o.since})
	if err != nil {
		return errAuditFailed{err}
	}
	if lakes == nil {
		if lakes = a.Lakes(); len(lakes) == 0 {
			return errAuditFailed{errors.New("no sink announced a lake on " + o.auditTopic + "; name one with --lake")}
		}
	}
	failed := errNotReconciled{}
	for _, url := range lakes {
		r, err := judgeLake(rctx, a, url, o)
		if err != nil {
			return errAuditFailed{err}
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
		failed.hours += r.Unreconciled
		// Every lake's report lists the topics no sink lands: count them once.
		failed.notLanded = len(r.NotLanded)
	}
	if failed.hours > 0 || failed.notLanded > 0 {
		return failed
	}
	return nil
}

// judgeLake opens one lake and reconciles it. Credentials for an s3://
// lake come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, as for
// `millrace sink`.
func judgeLake(ctx context.Context, a *reconcile.Audit, url string, o auditOptions) (*reconcile.Report, error) {
	st, err := store.Open(ctx, url, store.Options{S3Endpoint: o.s3Endpoint, S3Region: o.s3Region})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if !o.tables.given() {
		return a.Judge(ctx, st, url)
	}
	cat, err := o.tables.open(ctx, strings.TrimPrefix(url, "file://"))
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	return a.JudgeTables(ctx, st, url, cat)
}
