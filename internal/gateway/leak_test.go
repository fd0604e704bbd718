package gateway

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine is still running
// after the last test: every goroutine has an owner that stops it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
