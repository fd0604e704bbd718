//go:build unix

package mqttpub

import (
	"net"
	"syscall"
)

// socketLowat returns a function that sets conn's receive low-water mark
// (SO_RCVLOWAT): the socket is not reported readable, and so does not
// wake the process, until that many bytes are waiting or the connection
// ends. It returns nil when conn (or the connection under a TLS one) is
// not a socket.
func socketLowat(conn net.Conn) func(n int) error {
	if t, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = t.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(n int) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
		}); err != nil {
			return err
		}
		return serr
	}
}
