//go:build !linux

package mqttpub

import "net"

// lowWater: the mark is set on Linux only, where its effect on epoll's
// readiness is documented and tested; elsewhere the reader wakes for
// every segment, as it did before the mark.
func lowWater(*net.TCPConn) func(n int) error { return nil }
