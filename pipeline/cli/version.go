package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X millrace/pipeline/cli.Version=...".
var Version = "dev"

func init() {
	addCommand("", func(e *env) *cobra.Command {
		return &cobra.Command{
			Use:         "version",
			Short:       "print the version",
			Args:        exactArgs(0),
			Annotations: noClient,
			RunE: func(*cobra.Command, []string) error {
				_, err := fmt.Fprintln(e.stdout, "millrace", Version)
				return err
			},
		}
	})
}
