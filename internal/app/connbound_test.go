package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestUnauthenticatedPerClient: through a whole node, a client address
// whose one connection has only been refused (401) is at its bound of
// limits.max_unauthenticated_per_client = 1, so its next connection is
// closed at accept, while another address is served; once a request on
// the first connection authenticates, the address may open another.
func TestUnauthenticatedPerClient(t *testing.T) {
	s := startStack(t, stackOptions{limits: "max_unauthenticated_per_client = 1\n"})
	api := strings.TrimPrefix(s.api, "http://")
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", api)
		if err != nil {
			t.Skipf("cannot dial from %s: %v", from, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	br := map[net.Conn]*bufio.Reader{}
	models := func(c net.Conn, key string) (int, error) {
		t.Helper()
		if _, err := fmt.Fprintf(c, "GET /v1/models HTTP/1.1\r\nHost: n\r\nAuthorization: Bearer %s\r\n\r\n", key); err != nil {
			return 0, err
		}
		if br[c] == nil {
			br[c] = bufio.NewReader(c)
		}
		resp, err := http.ReadResponse(br[c], nil)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	first := dial("127.0.0.2")
	if st, err := models(first, "sk-not-a-key"); st != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d, %v; want 401", st, err)
	}
	if st, err := models(dial("127.0.0.2"), clientKey); err == nil {
		t.Fatalf("a second unauthenticated connection from the address was served: %d", st)
	}
	if st, err := models(dial("127.0.0.1"), clientKey); st != http.StatusOK {
		t.Fatalf("another address: %d, %v; want 200", st, err)
	}
	if st, err := models(first, clientKey); st != http.StatusOK {
		t.Fatalf("the first connection with the key: %d, %v; want 200", st, err)
	}
	if st, err := models(dial("127.0.0.2"), clientKey); st != http.StatusOK {
		t.Fatalf("after the first connection authenticated: %d, %v; want 200", st, err)
	}
}
