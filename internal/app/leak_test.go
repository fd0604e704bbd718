package app

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine is still running
// after the last test: every goroutine has an owner that stops it. The one
// exception is not the node's: Google's Gen AI SDK, which the Gemini tests
// use as a client, links OpenCensus, whose package init starts a worker
// that never stops.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
