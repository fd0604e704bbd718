package rawconn

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// maxRW is the most one read(2) or write(2) is asked to move, as in
// package net (internal/poll): larger calls may fail on some systems.
const maxRW = 1 << 30

// Conn is a TCP connection whose Read and Write are raw system calls.
// Every other method is the *net.TCPConn's.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// The raw calls run in callbacks; their arguments and results live
	// here, one set per direction, so that a call allocates nothing.
	// rmu and wmu hold them for one Read and one Write at a time, as the
	// descriptor's own locks do.
	rmu     sync.Mutex
	rb      []byte
	rn      int
	rerrno  syscall.Errno
	readFn  func(fd uintptr) bool
	wmu     sync.Mutex
	wb      []byte
	wn      int
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool
}

// Wrap returns c with raw reads and writes if it is a *net.TCPConn, and c
// itself otherwise.
func Wrap(c net.Conn) net.Conn {
	t, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := t.SyscallConn()
	if err != nil {
		return c
	}
	w := &Conn{TCPConn: t, rc: rc}
	w.readFn, w.writeFn = w.read, w.write
	return w
}

// Read reads into b with one read(2) once the socket is readable.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if len(b) > maxRW {
		b = b[:maxRW]
	}
	c.rmu.Lock()
	c.rb, c.rn, c.rerrno = b, 0, 0
	err := c.rc.Read(c.readFn)
	n, errno := c.rn, c.rerrno
	c.rb = nil
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is the raw call; false asks RawConn to wait for readability.
func (c *Conn) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rb[0])), uintptr(len(c.rb)))
		switch e {
		case 0:
			c.rn = int(n)
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.rerrno = e
			return true
		}
	}
}

// Write writes all of b, waiting for room whenever the socket's buffer
// is full. It returns the bytes written before an error.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	c.wb, c.wn, c.werrno = b, 0, 0
	err := c.rc.Write(c.writeFn)
	n, errno := c.wn, c.werrno
	c.wb = nil
	c.wmu.Unlock()
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// write is the raw call; false asks RawConn to wait for writability.
func (c *Conn) write(fd uintptr) bool {
	for c.wn < len(c.wb) {
		p := c.wb[c.wn:]
		if len(p) > maxRW {
			p = p[:maxRW]
		}
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werrno = e
			return true
		}
	}
	return true
}

// opError wraps err as package net does for a TCP connection.
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
