package cli

// millrace user add|list|delete: SCRAM credentials, three ways, as Kafka's
// kafka-configs.sh manages them:
//
//   - --zookeeper HOSTS[/chroot] writes the coordination store directly, so
//     the first users exist before any broker runs;
//   - --data DIR writes a stopped single broker's embedded store (the
//     store's lock refuses while the broker runs);
//   - otherwise -b BROKERS (with the client TLS/SASL flags of a user allowed
//     to alter credentials) goes through AlterUserScramCredentials and
//     DescribeUserScramCredentials.
//
// The password comes from a file (its trailing newline ignored), never a
// flag, so it stays out of shell history and process listings; only its
// salted SCRAM keys are stored.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/broker/coord/zk"
	"millrace/broker/users"
)

func init() {
	addCommand("user", userAddCommand)
	addCommand("user", userListCommand)
	addCommand("user", userDeleteCommand)
}

// userStoreFlags pick where the credentials are written.
type userStoreFlags struct {
	zookeeper string
	data      string
}

func addUserStoreFlags(fs *pflag.FlagSet) *userStoreFlags {
	f := &userStoreFlags{}
	fs.StringVar(&f.zookeeper, "zookeeper", "", "write the ZooKeeper ensemble `HOSTS[/chroot]` directly (no broker needed)")
	fs.StringVar(&f.data, "data", "", "write the embedded store of the stopped single broker with data `DIR`")
	return f
}

// open returns the store named by the flags, or nil to go through the
// Kafka API; close ends it.
func (f *userStoreFlags) open(e *env) (store coord.Store, close func(), err error) {
	switch {
	case f.zookeeper != "" && f.data != "":
		return nil, nil, usageError("--zookeeper and --data exclude each other")
	case (f.zookeeper != "" || f.data != "") && e.client.brokersGiven():
		return nil, nil, usageError("-b goes through the brokers; --zookeeper and --data write the store directly: give one")
	case f.zookeeper != "":
		s, err := zk.Connect(f.zookeeper, 10*time.Second, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to ZooKeeper at %s: %w", f.zookeeper, err)
		}
		return s, func() { s.Close() }, nil
	case f.data != "":
		server, err := embedded.Open(filepath.Join(f.data, "coord"), nil)
		if err != nil {
			return nil, nil, fmt.Errorf("opening the store in %s (is its broker running? stop it first, or use -b): %w", f.data, err)
		}
		s, err := server.Session()
		if err != nil {
			server.Close()
			return nil, nil, err
		}
		return s, func() { s.Close(); server.Close() }, nil
	}
	return nil, nil, nil
}

// parseMechanisms reads --mechanism's comma-separated SCRAM mechanisms.
func parseMechanisms(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		m := strings.ToUpper(strings.TrimSpace(v))
		if _, ok := users.Hash(m); !ok {
			return nil, usageError("--mechanism %q is not one of %s", v, strings.Join(users.Mechanisms, ", "))
		}
		out = append(out, m)
	}
	return out, nil
}

func kadmMechanism(m string) kadm.ScramMechanism {
	if m == users.SCRAMSHA256 {
		return kadm.ScramSha256
	}
	return kadm.ScramSha512
}

func userAddCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "add NAME --password-file F [--mechanism SCRAM-SHA-512] [--iterations 4096] [--zookeeper HOSTS | --data DIR]",
		Short: "add a SCRAM user, or change its password",
		Args:  exactArgs(1),
	}
	fs := cmd.Flags()
	mechanisms := fs.StringSlice("mechanism", []string{users.SCRAMSHA512}, "SCRAM mechanism(s) to store the credential for, comma-separated (PLAIN logins accept any)")
	passwordFile := fs.String("password-file", "", "`file` holding the password (trailing newline ignored)")
	iterations := fs.Int("iterations", users.MinIterations, fmt.Sprintf("PBKDF2 iterations, %d to %d", users.MinIterations, users.MaxIterations))
	where := addUserStoreFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := args[0]
		if err := users.CheckName(name); err != nil {
			return usageError("%v", err)
		}
		mechs, err := parseMechanisms(*mechanisms)
		if err != nil {
			return err
		}
		if err := users.CheckIterations(*iterations); err != nil {
			return usageError("--iterations: %v", err)
		}
		if *passwordFile == "" {
			return usageError("--password-file is required")
		}
		raw, err := os.ReadFile(*passwordFile)
		if err != nil {
			return err
		}
		password := strings.TrimRight(string(raw), "\r\n")
		if password == "" {
			return fmt.Errorf("%s holds no password", *passwordFile)
		}
		store, done, err := where.open(e)
		if err != nil {
			return err
		}
		if store != nil {
			defer done()
			for _, m := range mechs {
				cred, err := users.NewCredential(m, password, *iterations)
				if err != nil {
					return err
				}
				if err := users.Upsert(store, name, cred); err != nil {
					return err
				}
			}
		} else if err := withAdmin(cmd.Context(), e, func(ctx context.Context, adm *kadm.Client) error {
			var ups []kadm.UpsertSCRAM
			for _, m := range mechs {
				ups = append(ups, kadm.UpsertSCRAM{User: name, Mechanism: kadmMechanism(m), Iterations: int32(*iterations), Password: password})
			}
			res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
			if err == nil {
				err = res[name].Err
			}
			return err
		}); err != nil {
			return fmt.Errorf("add %s: %w", name, err)
		}
		fmt.Fprintf(e.stdout, "user %s: %s credential stored (%d iterations)\n", name, strings.Join(mechs, ", "), *iterations)
		return nil
	}
	return cmd
}

func userListCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--zookeeper HOSTS | --data DIR]",
		Short: "list the SCRAM users with their mechanisms and iterations",
		Args:  exactArgs(0),
	}
	where := addUserStoreFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		type row struct {
			user, mechanism string
			iterations      int
		}
		var rows []row
		store, done, err := where.open(e)
		if err != nil {
			return err
		}
		if store != nil {
			defer done()
			all, err := users.List(store)
			if err != nil {
				return err
			}
			for _, name := range users.Names(all) {
				for _, m := range users.Mechanisms {
					if c, ok := all[name][m]; ok {
						rows = append(rows, row{name, m, c.Iterations})
					}
				}
			}
		} else if err := withAdmin(cmd.Context(), e, func(ctx context.Context, adm *kadm.Client) error {
			described, err := adm.DescribeUserSCRAMs(ctx)
			if err != nil {
				return err
			}
			for _, d := range described.Sorted() {
				if d.Err != nil {
					return fmt.Errorf("%s: %w", d.User, d.Err)
				}
				for _, ci := range d.CredInfos {
					rows = append(rows, row{d.User, ci.Mechanism.String(), int(ci.Iterations)})
				}
			}
			return nil
		}); err != nil {
			return err
		}
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%d\n", r.user, r.mechanism, r.iterations)
		}
		return w.Flush()
	}
	return cmd
}

func userDeleteCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete NAME [--mechanism M] [--zookeeper HOSTS | --data DIR]",
		Short: "delete a SCRAM user's credentials (all, or those of --mechanism)",
		Args:  exactArgs(1),
	}
	mechanisms := cmd.Flags().StringSlice("mechanism", nil, "delete only the credentials of these mechanisms (default: all)")
	where := addUserStoreFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := args[0]
		if err := users.CheckName(name); err != nil {
			return usageError("%v", err)
		}
		mechs, err := parseMechanisms(*mechanisms)
		if err != nil {
			return err
		}
		store, done, err := where.open(e)
		if err != nil {
			return err
		}
		if store != nil {
			defer done()
			if len(mechs) == 0 {
				err = users.Delete(store, name, "")
			}
			for _, m := range mechs {
				if err = users.Delete(store, name, m); err != nil {
					break
				}
			}
		} else {
			err = withAdmin(cmd.Context(), e, func(ctx context.Context, adm *kadm.Client) error {
				if len(mechs) == 0 {
					described, err := adm.DescribeUserSCRAMs(ctx, name)
					if err != nil {
						return err
					}
					if err := described[name].Err; err != nil {
						return err
					}
					for _, ci := range described[name].CredInfos {
						mechs = append(mechs, ci.Mechanism.String())
					}
				}
				var dels []kadm.DeleteSCRAM
				for _, m := range mechs {
					dels = append(dels, kadm.DeleteSCRAM{User: name, Mechanism: kadmMechanism(m)})
				}
				res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
				if err == nil {
					err = res[name].Err
				}
				return err
			})
		}
		if errors.Is(err, users.ErrNoUser) {
			return fmt.Errorf("delete %s: no such credential", name)
		}
		if err != nil {
			return fmt.Errorf("delete %s: %w", name, err)
		}
		fmt.Fprintf(e.stdout, "user %s: credentials deleted\n", name)
		return nil
	}
	return cmd
}

// withAdmin runs f with an admin client of the -b brokers.
func withAdmin(ctx context.Context, e *env, f func(context.Context, *kadm.Client) error) error {
	adm, done, err := e.newAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	return f(ctx, adm)
}
