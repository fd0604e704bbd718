//go:build !linux

package mqttpub

import "net"

// lowWater: elsewhere than Linux the reader wakes for every segment, as
// poll(2) readiness there does not follow SO_RCVLOWAT everywhere.
func lowWater(*net.TCPConn) func(n int) error { return nil }
