//go:build !race

package egress

// raceEnabled says the test binary was built with -race.
const raceEnabled = false
