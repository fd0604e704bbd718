//go:build race

package sse_test

// raceEnabled says the test binary was built with -race.
const raceEnabled = true
