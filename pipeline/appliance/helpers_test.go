package appliance

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// startAppliance starts an appliance of cfg, shut down with the test, and
// returns it with a context that ends after limit (or with the test): the
// test's waits end with it. The appliance is shut down in a cleanup,
// after the test's defers have run: what it uses (a kfake cluster) must be
// closed by a cleanup registered before this call, not by a defer.
func startAppliance(t *testing.T, cfg Config, limit time.Duration) (*Appliance, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	a, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	return a, ctx
}
