package rawconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pair returns a wrapped client end and the plain server end of a
// loopback TCP connection.
func pair(t *testing.T) (*Conn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	w, ok := Wrap(c).(*Conn)
	if !ok {
		t.Fatalf("Wrap(%T) is not a *Conn", c)
	}
	return w, s.(*net.TCPConn)
}

// TestRoundTrip: bytes written through a Conn arrive, and bytes sent to
// it are read, in order, including a write far larger than the socket
// buffers, which has to wait for room many times.
func TestRoundTrip(t *testing.T) {
	c, s := pair(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(s, int64(len(big))))
		got <- b
	}()
	n, err := c.Write(big)
	if err != nil || n != len(big) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(big))
	}

	go func() { _, _ = s.Write(big) }()
	b, err := io.ReadAll(io.LimitReader(c, int64(len(big))))
	if err != nil || !bytes.Equal(b, big) {
		t.Fatalf("ReadAll = %d bytes, %v; want the %d written", len(b), err, len(big))
	}
	if n, err := c.Write(nil); n != 0 || err != nil {
		t.Errorf("Write(nil) = %d, %v", n, err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Errorf("Read(nil) = %d, %v", n, err)
	}
}

// TestEOF: the peer's close is io.EOF, after the bytes it sent.
func TestEOF(t *testing.T) {
	c, s := pair(t)
	if _, err := s.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "bye" {
		t.Fatalf("ReadAll = %q, %v; want bye, nil", b, err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the end = %d, %v; want io.EOF", n, err)
	}
}

// readAsync runs one Read of c in a goroutine and delivers its error.
func readAsync(c *Conn) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		done <- err
	}()
	return done
}

// TestDeadline: a read deadline ends a read that waits, with the error
// package net gives: a timeout, os.ErrDeadlineExceeded.
func TestDeadline(t *testing.T) {
	c, _ := pair(t)
	done := readAsync(c)
	if err := c.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline = %v; want a timeout", err)
	}
	if err := c.SetWriteDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past its deadline = %v; want os.ErrDeadlineExceeded", err)
	}
}

// TestCloseEndsRead: Close ends a read that waits, with net.ErrClosed.
func TestCloseEndsRead(t *testing.T) {
	c, _ := pair(t)
	done := readAsync(c)
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read across Close = %v; want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v; want net.ErrClosed", err)
	}
}

// TestReset: a reset by the peer is an *net.OpError around ECONNRESET,
// for reads and for writes.
func TestReset(t *testing.T) {
	c, s := pair(t)
	if err := s.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	s.Close() // with linger 0: RST
	_, err := io.ReadAll(c)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after a reset = %v; want a read OpError around ECONNRESET", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write after a reset = %v; want EPIPE or ECONNRESET", err)
	}
}

// TestConcurrent: reads and writes from several goroutines at once, under
// the race detector.
func TestConcurrent(t *testing.T) {
	c, s := pair(t)
	go func() { _, _ = io.Copy(s, s) }() // echo
	const writers, each = 4, 200
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := c.Write([]byte("ping")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	got := 0
	readers := make(chan int, 2)
	for range 2 {
		go func() {
			n := 0
			b := make([]byte, 64)
			for n < writers*each*4/2 {
				k, err := c.Read(b[:min(len(b), writers*each*4/2-n)])
				if err != nil {
					t.Error(err)
					break
				}
				n += k
			}
			readers <- n
		}()
	}
	wg.Wait()
	got += <-readers
	got += <-readers
	if got != writers*each*4 {
		t.Fatalf("read %d bytes; want %d", got, writers*each*4)
	}
}

// TestNoAllocations: a read and a write allocate nothing.
func TestNoAllocations(t *testing.T) {
	c, s := pair(t)
	msg := []byte("0123456789")
	buf := make([]byte, len(msg))
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%.1f allocations per write and read; want 0", n)
	}
}

// TestWrapLeavesOthers: only TCP connections are wrapped.
func TestWrapLeavesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if w := Wrap(a); w != a {
		t.Fatalf("Wrap(pipe) = %T; want the pipe itself", w)
	}
}

// TestListener: accepted connections come wrapped.
func TestListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listener{Listener: ln}
	defer l.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*Conn); !ok {
		t.Fatalf("Accept returned %T; want *Conn", s)
	}
}
