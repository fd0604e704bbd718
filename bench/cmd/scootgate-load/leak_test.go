package main

import (
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// runtimeProbeEnv set makes the test binary, started by a test with a
// system under test's command, print what the runtime gave it and exit
// (TestEverySUTRunsWithTheSameRuntime).
const runtimeProbeEnv = "SCOOTGATE_LOAD_RUNTIME_PROBE"

// TestMain fails the package's tests when a goroutine is still running
// after the last test: every goroutine has an owner that stops it.
func TestMain(m *testing.M) {
	if os.Getenv(runtimeProbeEnv) != "" {
		if err := json.NewEncoder(os.Stdout).Encode(readRuntime()); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
