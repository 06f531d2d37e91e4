package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The flags users type most have the one-letter forms rpk and kcat taught
// them, the same letter on every command that has the flag:
//
//	-b --brokers     -t --topic        -g --group     -c --config
//	-p --partitions (topic create, bench), --partition (consume, cluster elect)
//	-r --replication-factor (also --replicas, rpk's name)
//	-n --max (consume), --records (bench)
//	-o --offset      -f --format       -z --compression
//	-K --key-separator (kcat's -K)
//
// TestShortFlagsAreConsistent keeps every command to this table.

// flagAliases is the root's flag name normalization: rpk's --replicas
// is --replication-factor.
func flagAliases(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if name == "replicas" {
		name = "replication-factor"
	}
	return pflag.NormalizedName(name)
}

// singleDashLong finds a long flag written with one dash (-partitions, a
// habit of Go's flag package and of Kafka's Java tools). pflag reads it as
// one-letter flags: an error at best, and at worst a wrong value taken in
// silence (-topic as -t opic), so it is refused with the spelling that
// works.
func singleDashLong(cmd *cobra.Command, args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if len(name) < 2 {
			continue
		}
		if cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil || cmd.Root().PersistentFlags().Lookup(name) != nil {
			return usageError("%s: long flags take two dashes: --%s", a, strings.TrimPrefix(a, "-"))
		}
	}
	return nil
}
