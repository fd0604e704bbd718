//go:build race

package app

// raceEnabled says the test binary was built with -race.
const raceEnabled = true
