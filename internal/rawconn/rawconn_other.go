//go:build !linux

package rawconn

import "net"

// Wrap returns c: raw socket calls are made on Linux only.
func Wrap(c net.Conn) net.Conn { return c }
