package cli

// millrace quota set|list|delete: Kafka's client quotas
// (producer_byte_rate, consumer_byte_rate, request_percentage,
// controller_mutation_rate) for a user, a client ID, both, or their
// defaults, and the connection_creation_rate of an IP address or the
// default IP (KIP-612), through AlterClientQuotas and DescribeClientQuotas
// as kafka-configs.sh --entity-type users/clients/ips does. The -b
// brokers' principal needs AlterConfigs (set, delete) or DescribeConfigs
// (list) on the cluster when ACLs are on.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/quota"
)

func init() {
	addCommand("quota", quotaSetCommand)
	addCommand("quota", quotaListCommand)
	addCommand("quota", quotaDeleteCommand)
}

// quotaEntityFlags name the entity.
type quotaEntityFlags struct {
	user, clientID, ip                    string
	userDefault, clientDefault, ipDefault bool
}

func addQuotaEntityFlags(fs *pflag.FlagSet) *quotaEntityFlags {
	f := &quotaEntityFlags{}
	fs.StringVar(&f.user, "user", "", "the `USER` (a SASL user name, or the principal's name under TLS)")
	fs.BoolVar(&f.userDefault, "user-default", false, "every user without a quota of its own (<default>)")
	fs.StringVar(&f.clientID, "client-id", "", "the client `ID`")
	fs.BoolVar(&f.clientDefault, "client-default", false, "every client ID without a quota of its own (<default>)")
	fs.StringVar(&f.ip, "ip", "", "the IP `ADDR`ess connections come from (connection_creation_rate only)")
	fs.BoolVar(&f.ipDefault, "ip-default", false, "every IP address without a quota of its own (<default>)")
	return f
}

// entity is the entity the flags name; optional allows none (list).
func (f *quotaEntityFlags) entity(optional bool) (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	switch {
	case f.user != "" && f.userDefault:
		return nil, usageError("--user and --user-default exclude each other")
	case f.user != "":
		e = append(e, kadm.ClientQuotaEntityComponent{Type: quota.TypeUser, Name: &f.user})
	case f.userDefault:
		e = append(e, kadm.ClientQuotaEntityComponent{Type: quota.TypeUser})
	}
	switch {
	case f.clientID != "" && f.clientDefault:
		return nil, usageError("--client-id and --client-default exclude each other")
	case f.clientID != "":
		e = append(e, kadm.ClientQuotaEntityComponent{Type: quota.TypeClientID, Name: &f.clientID})
	case f.clientDefault:
		e = append(e, kadm.ClientQuotaEntityComponent{Type: quota.TypeClientID})
	}
	switch {
	case f.ip != "" && f.ipDefault:
		return nil, usageError("--ip and --ip-default exclude each other")
	case (f.ip != "" || f.ipDefault) && len(e) > 0:
		return nil, usageError("an IP's quota is its own: --ip and --ip-default do not combine with a user or a client ID")
	case f.ip != "":
		ip, ok := quota.CanonicalIP(f.ip)
		if !ok {
			return nil, usageError("--ip %q is not an IP address (host names are not resolved)", f.ip)
		}
		e = append(e, kadm.ClientQuotaEntityComponent{Type: quota.TypeIP, Name: &ip})
	case f.ipDefault:
		e = append(e, kadm.ClientQuotaEntityComponent{Type: quota.TypeIP})
	}
	if len(e) == 0 && !optional {
		return nil, usageError("name the entity: --user USER or --user-default, --client-id ID or --client-default, a user and a client ID, or --ip ADDR or --ip-default")
	}
	return e, nil
}

// checkKey checks key=value for the entity as the broker will, so a
// mistake is told before anything is sent.
func checkKey(entity kadm.ClientQuotaEntity, key string, value float64) error {
	components := make([]quota.Component, len(entity))
	for i, c := range entity {
		components[i] = quota.Component{Type: c.Type, Name: c.Name}
	}
	e, err := quota.ParseEntity(components)
	if err == nil {
		_, err = e.Check(key, value)
	}
	if err != nil {
		return usageError("%v", err)
	}
	return nil
}

// quotaKeys lists the quota names for messages.
func quotaKeys() string {
	names := make([]string, len(quota.Kinds))
	for i, k := range quota.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ") + ", and " + string(quota.ConnectionCreationRate) + " for an IP"
}

// alterQuotas sends one entry and returns its error.
func alterQuotas(cmd *cobra.Command, e *env, entity kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	return withAdmin(cmd.Context(), e, func(ctx context.Context, adm *kadm.Client) error {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
		if err != nil {
			return err
		}
		if len(res) != 1 {
			return fmt.Errorf("the broker answered %d results for one entity", len(res))
		}
		if res[0].Err != nil {
			if res[0].ErrMessage != "" {
				return fmt.Errorf("%w: %s", res[0].Err, res[0].ErrMessage)
			}
			return res[0].Err
		}
		return nil
	})
}

func quotaSetCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set ((--user USER | --user-default) (--client-id ID | --client-default) | --ip ADDR | --ip-default) KEY=VALUE...",
		Short: "set client quotas (producer_byte_rate=1048576, ...) for a user, a client ID, both, or a default; or an IP's connection_creation_rate",
		Args:  anyArgs,
	}
	who := addQuotaEntityFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		entity, err := who.entity(false)
		if err != nil {
			return err
		}
		if len(args) == 0 {
			return usageError("give the quotas to set as KEY=VALUE; the keys are %s", quotaKeys())
		}
		var ops []kadm.AlterClientQuotaOp
		for _, a := range args {
			key, value, ok := strings.Cut(a, "=")
			if !ok {
				return usageError("%q is not KEY=VALUE; the keys are %s", a, quotaKeys())
			}
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return usageError("%s=%q is not a number", key, value)
			}
			if err := checkKey(entity, key, v); err != nil {
				return err
			}
			ops = append(ops, kadm.AlterClientQuotaOp{Key: key, Value: v})
		}
		if err := alterQuotas(cmd, e, entity, ops); err != nil {
			return fmt.Errorf("set quotas of %s: %w", entity, err)
		}
		fmt.Fprintf(e.stdout, "quotas of %s set: %s\n", entity, strings.Join(args, " "))
		return nil
	}
	return cmd
}

func quotaDeleteCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete ((--user USER | --user-default) (--client-id ID | --client-default) | --ip ADDR | --ip-default) KEY...",
		Short: "remove client quotas of a user, a client ID, both, a default, or an IP",
		Args:  anyArgs,
	}
	who := addQuotaEntityFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		entity, err := who.entity(false)
		if err != nil {
			return err
		}
		if len(args) == 0 {
			return usageError("give the quotas to remove; the keys are %s", quotaKeys())
		}
		var ops []kadm.AlterClientQuotaOp
		for _, key := range args {
			if err := checkKey(entity, key, 0); err != nil {
				return err
			}
			ops = append(ops, kadm.AlterClientQuotaOp{Key: key, Remove: true})
		}
		if err := alterQuotas(cmd, e, entity, ops); err != nil {
			return fmt.Errorf("delete quotas of %s: %w", entity, err)
		}
		fmt.Fprintf(e.stdout, "quotas of %s deleted: %s\n", entity, strings.Join(args, " "))
		return nil
	}
	return cmd
}

func quotaListCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--user USER | --user-default] [--client-id ID | --client-default] [--ip ADDR | --ip-default]",
		Short: "list client and IP quotas: all, or those of the entities matching the flags",
		Args:  exactArgs(0),
	}
	who := addQuotaEntityFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		entity, err := who.entity(true)
		if err != nil {
			return err
		}
		var filter []kadm.DescribeClientQuotaComponent
		for _, c := range entity {
			match := kmsg.QuotasMatchTypeExact
			if c.Name == nil {
				match = kmsg.QuotasMatchTypeDefault
			}
			filter = append(filter, kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: match})
		}
		var described kadm.DescribedClientQuotas
		if err := withAdmin(cmd.Context(), e, func(ctx context.Context, adm *kadm.Client) error {
			described, err = adm.DescribeClientQuotas(ctx, false, filter)
			return err
		}); err != nil {
			return fmt.Errorf("list quotas: %w", err)
		}
		sort.Slice(described, func(i, j int) bool { return described[i].Entity.String() < described[j].Entity.String() })
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ENTITY\tQUOTAS")
		for _, d := range described {
			var values []string
			for _, v := range d.Values {
				values = append(values, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
			}
			fmt.Fprintf(w, "%s\t%s\n", d.Entity, strings.Join(values, " "))
		}
		return w.Flush()
	}
	return cmd
}
