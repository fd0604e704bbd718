package connectproxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/devstack/tunnel/tunneltest"
)

func start(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	s, addr, err := Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, addr
}

// roundTrip sends req on a new connection and reads the proxy's answer.
func roundTrip(t *testing.T, addr, req string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c := tunneltest.Dial(t, addr)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

func basic(user, pass string) string {
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) + "\r\n"
}

func TestRefusals(t *testing.T) {
	dead := tunneltest.DeadAddr(t)
	auth := Options{Username: "u", Password: "p"}
	tests := []struct {
		name string
		opts Options
		req  string
		want int
		// wantAuthenticate is the Proxy-Authenticate header expected.
		wantAuthenticate string
	}{
		{"not CONNECT", Options{}, "GET http://" + dead + "/ HTTP/1.1\r\nHost: " + dead + "\r\n\r\n", 405, ""},
		{"no credentials", auth, "CONNECT " + dead + " HTTP/1.1\r\nHost: " + dead + "\r\n\r\n", 407, `Basic realm="connectproxy"`},
		{"wrong password", auth, "CONNECT " + dead + " HTTP/1.1\r\n" + basic("u", "x") + "\r\n", 407, `Basic realm="connectproxy"`},
		{"not host:port", Options{}, "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", 400, ""},
		{"policy", Options{Allow: func(string, int) bool { return false }}, "CONNECT " + dead + " HTTP/1.1\r\n\r\n", 403, ""},
		{"target refused", auth, "CONNECT " + dead + " HTTP/1.1\r\n" + basic("u", "p") + "\r\n", 502, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, addr := start(t, tt.opts)
			_, _, resp := roundTrip(t, addr, tt.req)
			resp.Body.Close()
			type result struct {
				Status       int
				Authenticate string
				Tunnels      int64
			}
			got := result{resp.StatusCode, resp.Header.Get("Proxy-Authenticate"), s.Tunnels()}
			if diff := cmp.Diff(got, result{tt.want, tt.wantAuthenticate, 0}); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

func TestTunnel(t *testing.T) {
	echo := tunneltest.EchoServer(t)
	var (
		mu   sync.Mutex
		seen []string
	)
	hook := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		seen = append(seen, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, echo)
	}
	s, addr := start(t, Options{Username: "u", Password: "p", Dial: hook})
	// "early" is sent before the 200 arrives: it must reach the target first.
	c, br, resp := roundTrip(t, addr, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"+basic("u", "p")+"\r\nearly")
	if _, err := io.WriteString(c, "+late"); err != nil {
		t.Fatal(err)
	}
	echoed := make([]byte, len("early+late"))
	if _, err := io.ReadFull(br, echoed); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Status               int
		Echo                 string
		Seen                 []string
		Connections, Tunnels int64
	}
	mu.Lock()
	got := result{resp.StatusCode, string(echoed), seen, s.Connections(), s.Tunnels()}
	mu.Unlock()
	want := result{200, "early+late", []string{"example.com:443"}, 1, 1}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// TestCloseEndsTunnels: Close cuts an open tunnel. The rest of the
// lifecycle is package tunnel's and tested there.
func TestCloseEndsTunnels(t *testing.T) {
	echo := tunneltest.EchoServer(t)
	s, addr := start(t, Options{})
	c, _, resp := roundTrip(t, addr, "CONNECT "+echo+" HTTP/1.1\r\n\r\n")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	s.Close()
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read after Close: %v, want the tunnel cut", err)
	}
}
