package credential_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine is still running
// after the last test: a TokenSource's grants have an owner that stops
// them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
