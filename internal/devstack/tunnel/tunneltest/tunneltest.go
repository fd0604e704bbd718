// Package tunneltest has the loopback fixtures the proxy tests in
// internal/devstack share: a target that echoes, an address nothing listens
// on, and a client dial. All clean up when the test ends.
package tunneltest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// EchoServer listens on loopback and echoes every connection until the test
// ends; it returns the address.
func EchoServer(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return l.Addr().String()
}

// DeadAddr returns a loopback address nothing listens on: dials to it are
// refused.
func DeadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Dial connects to addr with a 5 s deadline, so a stuck proxy fails the test
// instead of hanging it; the connection is closed when the test ends.
func Dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}
