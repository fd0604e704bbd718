package mqttpub

import (
	"net"
	"syscall"
)

// lowWater returns a setter of tc's receive low-water mark: a wakeup of
// its reader, and epoll's readiness, wait for that many bytes (Linux
// 4.18 on; a FIN or an error wakes it whatever the mark).
func lowWater(tc *net.TCPConn) func(n int) error {
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(n int) error {
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
		}); err != nil {
			return err
		}
		return serr
	}
}
