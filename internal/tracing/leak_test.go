package tracing

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine is still running
// after the last test: Run, its shutdown-budget goroutine and the exports
// end with their context.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
