package cli

import (
	"context"
	"fmt"
)

// Version is set at build time with -ldflags "-X millrace/pipeline/cli.Version=...".
var Version = "dev"

func init() {
	register("version", "version", func(_ context.Context, e env, _ []string) error {
		fmt.Fprintln(e.stdout, "millrace", Version)
		return nil
	})
}
