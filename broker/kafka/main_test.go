package kafka

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: Close
// must join the listener, every connection and every handler.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
