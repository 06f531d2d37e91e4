package cli

// millrace acl add|list|remove: the broker's ACLs through the Kafka API
// (CreateAcls, DescribeAcls, DeleteAcls), with kafka-acls.sh's flags.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() {
	addCommand("acl", aclAddCommand)
	addCommand("acl", aclListCommand)
	addCommand("acl", aclRemoveCommand)
}

// aclFlags are kafka-acls.sh's resource and principal flags.
type aclFlags struct {
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	operations                      []string
	topics, groups, txnIDs          []string
	cluster                         bool
	patternType                     string
}

func addACLFlags(fs *pflag.FlagSet, f *aclFlags, filter bool) {
	fs.StringArrayVar(&f.allowPrincipals, "allow-principal", nil, "principal to allow, `User:name` (repeatable)")
	fs.StringArrayVar(&f.denyPrincipals, "deny-principal", nil, "principal to deny, `User:name` (repeatable)")
	hostHelp := "host the allow applies to, an IP address or * (repeatable; default *)"
	if filter {
		hostHelp = "host of the allows to match (repeatable; default any)"
	}
	fs.StringArrayVar(&f.allowHosts, "allow-host", nil, hostHelp)
	fs.StringArrayVar(&f.denyHosts, "deny-host", nil, strings.Replace(hostHelp, "allow", "deny", 1))
	opHelp := "operation: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All (repeatable)"
	if filter {
		opHelp += "; default any"
	}
	fs.StringArrayVar(&f.operations, "operation", nil, opHelp)
	fs.StringArrayVarP(&f.topics, "topic", "t", nil, "topic `name` (repeatable; * for every topic)")
	fs.StringArrayVarP(&f.groups, "group", "g", nil, "consumer group `name` (repeatable; * for every group)")
	fs.StringArrayVar(&f.txnIDs, "transactional-id", nil, "transactional `id` (repeatable)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource (kafka-cluster)")
	patternHelp := "resource pattern type: literal or prefixed"
	def := "literal"
	if filter {
		patternHelp = "resource pattern type: any, match (the patterns that apply to the names given), literal or prefixed"
		def = "any"
	}
	fs.StringVar(&f.patternType, "resource-pattern-type", def, patternHelp)
}

func (f *aclFlags) hasResource() bool {
	return len(f.topics)+len(f.groups)+len(f.txnIDs) > 0 || f.cluster
}

// builder turns the flags into a kadm ACL builder; filter selects the
// describe/delete reading (no resource = any, no principal = any).
func (f *aclFlags) builder(filter bool) (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs()
	switch strings.ToLower(f.patternType) {
	case "literal":
		b.ResourcePatternType(kadm.ACLPatternLiteral)
	case "prefixed":
		b.ResourcePatternType(kadm.ACLPatternPrefixed)
	case "any":
		b.ResourcePatternType(kadm.ACLPatternAny)
	case "match":
		b.ResourcePatternType(kadm.ACLPatternMatch)
	default:
		return nil, usageError("--resource-pattern-type %q: use literal or prefixed%s", f.patternType, map[bool]string{true: " (or any, match)"}[filter])
	}
	if filter && !f.hasResource() {
		b.AnyResource()
	} else {
		b.MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeTransactionalIDs(f.txnIDs...).MaybeClusters(f.cluster)
	}
	for _, p := range append(append([]string(nil), f.allowPrincipals...), f.denyPrincipals...) {
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return nil, usageError("principal %q is not of the form User:name", p)
		}
	}
	if filter && len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
		// Any principal, allowed or denied.
		b.Allow().AllowHosts(f.allowHosts...).Deny().DenyHosts(f.denyHosts...)
	} else {
		b.MaybeAllow(f.allowPrincipals...).MaybeDeny(f.denyPrincipals...)
		if filter {
			b.AllowHosts(f.allowHosts...).DenyHosts(f.denyHosts...)
		} else {
			b.MaybeAllowHosts(f.allowHosts...).MaybeDenyHosts(f.denyHosts...)
		}
	}
	var ops []kadm.ACLOperation
	for _, name := range f.operations {
		op, err := acl.ParseOperation(name)
		if err != nil {
			return nil, usageError("--operation %q: %v", name, err)
		}
		ops = append(ops, kmsg.ACLOperation(op))
	}
	b.Operations(ops...)
	return b, nil
}

func aclAddCommand(e *env) *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "add (--allow-principal P | --deny-principal P) --operation OP (--topic T | --group G | --cluster | --transactional-id X) [--resource-pattern-type literal|prefixed] [--allow-host H] [--deny-host H]",
		Short: "add ACLs (every principal × operation × resource given)",
		Args:  exactArgs(0),
	}
	addACLFlags(cmd.Flags(), &f, false)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case len(f.allowPrincipals)+len(f.denyPrincipals) == 0:
			return usageError("give --allow-principal or --deny-principal")
		case len(f.operations) == 0:
			return usageError("give --operation")
		case !f.hasResource():
			return usageError("give --topic, --group, --cluster or --transactional-id")
		}
		b, err := f.builder(false)
		if err != nil {
			return err
		}
		if err := b.ValidateCreate(); err != nil {
			return usageError("%v", err)
		}
		return withAdmin(cmd.Context(), e, func(ctx context.Context, adm *kadm.Client) error {
			res, err := adm.CreateACLs(ctx, b)
			if err != nil {
				return err
			}
			var failed []string
			for _, r := range res {
				if r.Err != nil {
					failed = append(failed, fmt.Sprintf("%s %s %s on %s: %v", r.Permission, r.Principal, r.Operation, aclResource(r.Type, r.Pattern, r.Name), errMessage(r.Err, r.ErrMessage)))
					continue
				}
				fmt.Fprintf(e.stdout, "added: %s %s from %s %s on %s\n", aclPermission(r.Permission), r.Principal, r.Host, aclOperation(r.Operation), aclResource(r.Type, r.Pattern, r.Name))
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d ACL(s) not added:\n  %s", len(failed), strings.Join(failed, "\n  "))
			}
			return nil
		})
	}
	return cmd
}

func aclListCommand(e *env) *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "list [--topic T | --group G | --cluster | --transactional-id X] [--resource-pattern-type any|match|literal|prefixed] [--allow-principal P] [--deny-principal P] [--operation OP]",
		Short: "list the ACLs (all, or those the flags select)",
		Args:  exactArgs(0),
	}
	addACLFlags(cmd.Flags(), &f, true)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		b, err := f.builder(true)
		if err != nil {
			return err
		}
		return withAdmin(cmd.Context(), e, func(ctx context.Context, adm *kadm.Client) error {
			res, err := adm.DescribeACLs(ctx, b)
			if err != nil {
				return err
			}
			var rows []kadm.DescribedACL
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("list: %v", errMessage(r.Err, r.ErrMessage))
				}
				rows = append(rows, r.Described...)
			}
			rows = dedupACLs(rows)
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "RESOURCE\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
			for _, d := range rows {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", aclResource(d.Type, d.Pattern, d.Name), d.Principal, d.Host, aclOperation(d.Operation), aclPermission(d.Permission))
			}
			return w.Flush()
		})
	}
	return cmd
}

func aclRemoveCommand(e *env) *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "remove (--topic T | --group G | --cluster | --transactional-id X) [--allow-principal P] [--deny-principal P] [--operation OP] [--resource-pattern-type any|match|literal|prefixed] [--allow-host H] [--deny-host H]",
		Short: "remove the ACLs the flags select",
		Args:  exactArgs(0),
	}
	addACLFlags(cmd.Flags(), &f, true)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// Removing every ACL of the cluster by accident is one missing flag
		// away; a resource is required, as kafka-acls.sh requires one.
		if !f.hasResource() {
			return usageError("give --topic, --group, --cluster or --transactional-id (--topic '*' --resource-pattern-type any for every topic ACL)")
		}
		b, err := f.builder(true)
		if err != nil {
			return err
		}
		return withAdmin(cmd.Context(), e, func(ctx context.Context, adm *kadm.Client) error {
			res, err := adm.DeleteACLs(ctx, b)
			if err != nil {
				return err
			}
			removed := 0
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("remove: %v", errMessage(r.Err, r.ErrMessage))
				}
				for _, d := range r.Deleted {
					if d.Err != nil {
						return fmt.Errorf("remove: %v", errMessage(d.Err, d.ErrMessage))
					}
					removed++
					fmt.Fprintf(e.stdout, "removed: %s %s from %s %s on %s\n", aclPermission(d.Permission), d.Principal, d.Host, aclOperation(d.Operation), aclResource(d.Type, d.Pattern, d.Name))
				}
			}
			if removed == 0 {
				fmt.Fprintln(e.stdout, "no ACL matched")
			}
			return nil
		})
	}
	return cmd
}

// dedupACLs sorts and removes repeats (the allow and deny filters of one
// listing can both match an ACL).
func dedupACLs(rows []kadm.DescribedACL) []kadm.DescribedACL {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		ka := fmt.Sprint(a.Type, a.Pattern, a.Name, a.Principal, a.Host, a.Operation, a.Permission)
		kb := fmt.Sprint(b.Type, b.Pattern, b.Name, b.Principal, b.Host, b.Operation, b.Permission)
		return ka < kb
	})
	out := rows[:0]
	for i, r := range rows {
		if i == 0 || r != rows[i-1] {
			out = append(out, r)
		}
	}
	return out
}

func aclResource(t kmsg.ACLResourceType, p kadm.ACLPattern, name string) string {
	return fmt.Sprintf("%s:%s:%s", acl.ResourceType(t), acl.PatternType(p), name)
}

func aclOperation(op kadm.ACLOperation) string { return acl.Operation(op).String() }

func aclPermission(p kmsg.ACLPermissionType) string { return acl.Permission(p).String() }

func errMessage(err error, msg string) string {
	if msg != "" {
		return err.Error() + ": " + msg
	}
	return err.Error()
}
