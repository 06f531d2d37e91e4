package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"

	"millrace/schemas/srclient"
)

func init() {
	addCommand("schema", schemaImportCommand)
}

func schemaImportCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import --from URL [--from-user U --from-password-file F] [--force]",
		Short: "copy every subject version, with its ID, from another Confluent-compatible registry into this one",
		Long: "Copies every live subject version of the registry at --from into --registry, keeping " +
			"schema IDs and version numbers, so records framed with the old IDs decode against the new " +
			"registry. The target is put in IMPORT mode for the copy and its mode is restored after, " +
			"also when the copy fails. IMPORT needs an empty target unless --force.",
		Args:        exactArgs(0),
		Annotations: noClient,
	}
	reg := addRegistryFlags(cmd.Flags())
	var from registryFlags
	cmd.Flags().StringVar(&from.url, "from", "", "`URL` of the registry to copy from")
	cmd.Flags().StringVar(&from.user, "from-user", "", "basic auth `user` of the registry to copy from")
	cmd.Flags().StringVar(&from.passwordFile, "from-password-file", "", "`file` holding that user's password")
	force := cmd.Flags().Bool("force", false, "import into a registry that already holds schemas (their IDs must not collide)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if from.url == "" {
			return usageError("--from is required")
		}
		source, err := from.client()
		if err != nil {
			return err
		}
		target, err := reg.client()
		if err != nil {
			return err
		}
		n, err := importSchemas(cmd, source, target, *force)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "imported %d schema versions from %s\n", n, from.url)
		return nil
	}
	return cmd
}

// importSchemas copies source's live subject versions into target under
// IMPORT mode and restores target's global mode afterwards. Versions go in
// ID order: a schema's references were registered before it, so they have
// lower IDs and are in place when it arrives.
func importSchemas(cmd *cobra.Command, source, target *srclient.Client, force bool) (n int, err error) {
	ctx := cmd.Context()
	all, err := source.API().AllSchemas(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", source.URL(), err)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return a.Version < b.Version
	})
	before := target.API().Mode(ctx)[0]
	if before.Err != nil {
		return 0, fmt.Errorf("reading the mode of %s: %w", target.URL(), before.Err)
	}
	setCtx := ctx
	if force {
		setCtx = sr.WithParams(ctx, sr.Force)
	}
	if res := target.API().SetMode(setCtx, sr.ModeImport)[0]; res.Err != nil {
		return 0, fmt.Errorf("setting %s to IMPORT mode: %w", target.URL(), res.Err)
	}
	defer func() {
		if before.Mode == sr.ModeImport {
			return
		}
		if res := target.API().SetMode(ctx, before.Mode)[0]; res.Err != nil {
			err = errors.Join(err, fmt.Errorf("restoring the mode %s of %s: %w", before.Mode, target.URL(), res.Err))
		}
	}()
	for _, s := range all {
		id, err := target.API().RegisterSchema(ctx, s.Subject, s.Schema, s.ID, s.Version)
		if err != nil {
			return n, fmt.Errorf("importing %s version %d (ID %d): %w", s.Subject, s.Version, s.ID, err)
		}
		if id != s.ID {
			return n, fmt.Errorf("importing %s version %d: the target gave it ID %d instead of %d", s.Subject, s.Version, id, s.ID)
		}
		n++
	}
	return n, nil
}

// readAllLimited reads r to its end, refusing more than limit bytes.
func readAllLimited(r io.Reader, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("the input is larger than %d bytes", limit)
	}
	return b, nil
}
