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
	r  half // Read's
	w  half // Write's
}

// half is one direction's raw call. The call runs in a callback, so its
// arguments and results live here and a call allocates nothing; mu holds
// them for one call at a time, as the descriptor's own locks do.
type half struct {
	mu    sync.Mutex
	b     []byte
	n     int
	errno syscall.Errno
	call  func(fd uintptr) bool // the raw call; false: wait for readiness
}

// run makes the raw call on b through wait (the RawConn's Read or Write),
// and returns what it moved, its errno, and wait's own error.
func (h *half) run(wait func(func(uintptr) bool) error, b []byte) (int, syscall.Errno, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.b, h.n, h.errno = b, 0, 0
	err := wait(h.call)
	h.b = nil
	return h.n, h.errno, err
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
	w.r.call, w.w.call = w.r.read, w.w.write
	return w
}

// Read reads into b with one read(2) once the socket is readable.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, errno, err := c.r.run(c.rc.Read, b)
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

// Write writes all of b, waiting for room whenever the socket's buffer
// is full. It returns the bytes written before an error.
func (c *Conn) Write(b []byte) (int, error) {
	n, errno, err := c.w.run(c.rc.Write, b)
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// read is Read's raw call.
func (h *half) read(fd uintptr) bool {
	n, e := rawCall(syscall.SYS_READ, fd, h.b)
	switch e {
	case 0:
		h.n = n
	case syscall.EAGAIN:
		return false
	default:
		h.errno = e
	}
	return true
}

// write is Write's raw call: it writes until b is out or the buffer is
// full.
func (h *half) write(fd uintptr) bool {
	for h.n < len(h.b) {
		n, e := rawCall(syscall.SYS_WRITE, fd, h.b[h.n:])
		switch e {
		case 0:
			h.n += n
		case syscall.EAGAIN:
			return false
		default:
			h.errno = e
			return true
		}
	}
	return true
}

// rawCall makes one read(2) or write(2) (trap) of p, at most maxRW bytes,
// as a raw system call, again after EINTR. p is not empty.
func rawCall(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e != syscall.EINTR {
			return int(n), e
		}
	}
}

// opError wraps err as package net does for a TCP connection.
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
