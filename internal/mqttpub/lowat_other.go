//go:build !unix

package mqttpub

import "net"

// socketLowat is not available here: a gathering read still waits for
// the next burst, and PUBACKs that arrive meanwhile may wake the process.
func socketLowat(net.Conn) func(n int) error { return nil }
