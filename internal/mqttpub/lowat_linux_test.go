package mqttpub

import (
	"net"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// onSocket runs fn on c's file descriptor and fails the test if fn or
// the descriptor's Control does.
func onSocket(t *testing.T, c net.Conn, fn func(fd uintptr) error) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(fd) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
}

// sockopt reads an int socket option of c.
func sockopt(t *testing.T, c net.Conn, opt int) int {
	t.Helper()
	var v int
	onSocket(t, c, func(fd uintptr) (err error) {
		v, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt)
		return err
	})
	return v
}

// queued is the number of bytes waiting in c's receive queue.
func queued(t *testing.T, c net.Conn) int {
	t.Helper()
	var n int32
	onSocket(t, c, func(fd uintptr) error {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
			return errno
		}
		return nil
	})
	return int(n)
}

// readable reports whether the kernel reports c readable within wait.
func readable(t *testing.T, c net.Conn, wait time.Duration) bool {
	t.Helper()
	var n int
	onSocket(t, c, func(fd uintptr) (err error) {
		var set syscall.FdSet
		set.Bits[fd/64] |= 1 << (fd % 64)
		tv := syscall.NsecToTimeval(wait.Nanoseconds())
		n, err = syscall.Select(int(fd)+1, &set, nil, nil, &tv)
		return err
	})
	return n > 0
}

// TestPacedReadQuietsTheSocket: while a read waits for the next burst,
// the socket's receive low-water mark is raised, so PUBACKs that arrive
// meanwhile do not report it readable (and do not wake the process);
// before the read goes to the socket, the mark is back at one byte, so a
// read never waits on the socket for more than the broker sent.
func TestPacedReadQuietsTheSocket(t *testing.T) {
	cli, srv := tcpPair(t)
	pace := newFakePace()
	g := newPacedConn(cli, func() {}, waitLimit, pace.gatherer())
	defer g.abort()

	g.kick() // the burst whose PUBACKs the read below awaits
	got := readString(g)
	recv(t, pace.asked) // waiting for the next burst
	if v := sockopt(t, cli, syscall.SO_RCVLOWAT); v != gatherLowat {
		t.Fatalf("SO_RCVLOWAT while the read waits for a burst = %d; want %d", v, gatherLowat)
	}
	if _, err := srv.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bytes queued", func() bool { return queued(t, cli) == 2 })
	if readable(t, cli, 0) {
		t.Fatal("the socket reports 2 queued bytes readable while the read waits for a burst")
	}
	// The control: the same bytes with the mark at one byte are readable.
	if err := g.lowat(1); err != nil {
		t.Fatal(err)
	}
	if !readable(t, cli, 0) {
		t.Fatal("2 queued bytes are not readable with the mark at 1")
	}
	if err := g.lowat(gatherLowat); err != nil {
		t.Fatal(err)
	}
	g.kick()
	if s := recv(t, got); s != "ab" {
		t.Fatalf("Read = %q; want ab", s)
	}
	if v := sockopt(t, cli, syscall.SO_RCVLOWAT); v != 1 {
		t.Fatalf("SO_RCVLOWAT after the read = %d; want 1", v)
	}

	// No burst comes: the hold ends the wait, and the read then waits on
	// the socket for a single byte.
	got = readString(g)
	recv(t, pace.asked)
	pace.fire <- time.Now()
	if _, err := srv.Write([]byte("c")); err != nil {
		t.Fatal(err)
	}
	if s := recv(t, got); s != "c" {
		t.Fatalf("Read = %q; want c", s)
	}
}

// TestUnpacedReadLeavesTheSocket: without pacing nothing touches the mark.
func TestUnpacedReadLeavesTheSocket(t *testing.T) {
	cli, srv := tcpPair(t)
	g := newGenConn(cli, func() {}, waitLimit)
	defer g.abort()
	if g.lowat != nil {
		t.Fatal("an unpaced connection sets the low-water mark")
	}
	if _, err := srv.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if s := recv(t, readString(g)); s != "x" {
		t.Fatalf("Read = %q; want x", s)
	}
}
