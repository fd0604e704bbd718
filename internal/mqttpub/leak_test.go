package mqttpub

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine is still running
// after the last test: every goroutine has an owner that stops it. It also
// removes the benchmarks' shared backlog file.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if dir := backlogTemplate.dir; dir != "" {
			_ = os.RemoveAll(dir)
		}
		os.Exit(code)
	}))
}
