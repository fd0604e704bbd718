//go:build race

package usage

func init() { raceEnabled = true }
