package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// haproxyConfig is deploy/lb/haproxy.cfg with only what a test must
// change: the frontend binds the inherited listener (fd@3), the two
// servers are the test nodes (plain HTTP on loopback, their own health
// ports), the TLS options go and maxconn fits a test's open-file limit.
// Every timeout, check, retry and per-source setting is the example's.
func haproxyConfig(t *testing.T, nodes ...*stack) string {
	t.Helper()
	return haproxyConfigWith(t, haproxyRewrite{}, nodes...)
}

// haproxyRewrite is what a test changes in deploy/lb/haproxy.cfg beyond
// haproxyConfig's rewrites.
type haproxyRewrite struct {
	// tlsCert, when set, is a PEM file (certificate and key) the
	// frontend serves TLS with, offering h2 and http/1.1 as the
	// example does; otherwise the frontend is plain HTTP/1.1.
	tlsCert string
	// statsSocket, when set, is a Unix socket for HAProxy's runtime API
	// ("show stat").
	statsSocket string
	// open drops the per-source limits: the stick-table and every
	// tcp-request and http-request rule.
	open bool
}

func haproxyConfigWith(t *testing.T, rw haproxyRewrite, nodes ...*stack) string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/lb/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	hostport := func(u string) (string, string) {
		h, p, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		return h, p
	}
	var out []string
	servers, dropped := 0, 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case rw.open && len(f) > 0 && (f[0] == "stick-table" || f[0] == "tcp-request" || f[0] == "http-request"):
			dropped++
			continue
		case rw.statsSocket != "" && len(f) > 0 && f[0] == "global":
			line += "\n    stats socket " + rw.statsSocket
		case len(f) > 0 && f[0] == "bind" && rw.tlsCert != "":
			line = "    bind fd@3 ssl crt " + rw.tlsCert + " alpn h2,http/1.1"
		case len(f) > 0 && f[0] == "bind":
			line = "    bind fd@3"
		case len(f) > 0 && f[0] == "maxconn":
			line = "    maxconn 1000" // the example's needs a higher open-file limit than a test has
		case len(f) > 0 && f[0] == "default-server":
			var keep []string
			for i := 0; i < len(f); i++ {
				switch f[i] {
				case "ssl", "no-check-ssl":
				case "verify", "ca-file", "crt":
					i++ // and its argument
				default:
					keep = append(keep, f[i])
				}
			}
			line = "    " + strings.Join(keep, " ")
		case len(f) > 0 && f[0] == "server":
			if servers >= len(nodes) {
				t.Fatalf("haproxy.cfg has more server lines than the %d test nodes", len(nodes))
			}
			h, p := hostport(nodes[servers].api)
			_, hp := hostport(nodes[servers].health)
			line = fmt.Sprintf("    server %s %s:%s port %s", f[1], h, p, hp)
			servers++
		}
		out = append(out, line)
	}
	if servers != len(nodes) {
		t.Fatalf("haproxy.cfg has %d server lines, want %d", servers, len(nodes))
	}
	if rw.open && dropped == 0 {
		t.Fatal("haproxy.cfg has no per-source limits to drop")
	}
	return strings.Join(out, "\n")
}

// TestHAProxyDrain runs Debian's HAProxy with the example configuration
// in front of two real nodes and keeps sending requests while node1
// drains (SIGTERM: /readyz fails, drain.delay, stop accepting): every
// request succeeds, and once node1 has stopped node2 serves them all.
func TestHAProxyDrain(t *testing.T) {
	haproxy := requireTool(t, "haproxy", "haproxy")
	// drain.delay above the example's fall x inter (2 x 2s): HAProxy marks
	// node1 down while it still accepts.
	n1 := startStack(t, stackOptions{delay: "5s", grace: "10s"})
	n2 := startStack(t, stackOptions{})
	logs := &syncBuffer{}
	lbURL := "http://" + startHAProxy(t, haproxy, haproxyConfig(t, n1, n2), logs)

	var (
		mu       sync.Mutex
		failures []string
		served   int
	)
	// All the requests come from 127.0.0.1: together they stay under the
	// example's per-source request rate (1000 a second) and, keeping
	// their connections (Go's default transport keeps only 2 idle, and so
	// opens one for nearly every request of 5 senders), under its rate of
	// new connections (50 a second), as the clients of one address should.
	pace := time.NewTicker(2 * time.Millisecond)
	defer pace.Stop()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	send := func(client *http.Client) {
		<-pace.C
		req, _ := http.NewRequest(http.MethodPost, lbURL+"/v1/chat/completions", strings.NewReader(chat))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := client.Do(req)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failures = append(failures, err.Error())
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			failures = append(failures, fmt.Sprintf("status %d: %s", resp.StatusCode, body))
			return
		}
		served++
	}
	// Both nodes serve before the drain.
	client := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	for n1.prov.RequestCount() == 0 || n2.prov.RequestCount() == 0 {
		send(client)
		if len(failures) > 0 || served > 200 {
			t.Fatalf("before the drain: %d served, failures %v\n%s", served, failures, logs.String())
		}
	}

	ctx, stopLoad := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 30 * time.Second, Transport: tr}
			for ctx.Err() == nil {
				send(c)
			}
		}()
	}
	n1.shutdown() // drain.delay, then stop; returns once Run has
	after := n2.prov.RequestCount()
	for n2.prov.RequestCount() < after+20 {
		send(client)
	}
	stopLoad()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed while node1 drained, first: %s\nhaproxy:\n%s", len(failures), served+len(failures), failures[0], logs.String())
	}
	if !strings.Contains(n1.logs.String(), `"msg":"draining"`) {
		t.Error("node1 did not drain")
	}
	// The health check saw it: /readyz failing (Layer7, 503) or, past
	// drain.delay, the closed health port (Layer4).
	if !strings.Contains(logs.String(), "scootgate/node1 is DOWN") {
		t.Errorf("HAProxy never marked node1 down:\n%s", logs.String())
	}
	t.Logf("%d requests through HAProxy, none failed while node1 drained", served)
}

// startHAProxy checks cfg and runs HAProxy with it until the test ends,
// its frontend on a loopback listener it inherits as fd@3, its log to
// logs; it returns the listener's address.
func startHAProxy(t *testing.T, haproxy, cfg string, logs io.Writer) string {
	t.Helper()
	cfgPath := t.TempDir() + "/haproxy.cfg"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lnFile, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lnFile.Close()
	addr := ln.Addr().String()
	ln.Close() // the duplicate in lnFile stays open for HAProxy
	check := exec.Command(haproxy, "-c", "-f", cfgPath)
	check.ExtraFiles = []*os.File{lnFile}
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	cmd := exec.Command(haproxy, "-f", cfgPath, "-db")
	cmd.ExtraFiles = []*os.File{lnFile}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return addr
}

// syncBuffer collects a child's stdout and stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHAProxyPerSourceLimits runs the example configuration, with its
// per-source limits, in front of a real node, its frontend serving TLS as
// the example's does: a client that opens connections and resets them is
// refused at accept once it is past the connection rate, the HTTP/2 rapid
// reset loses its connection once it is past the request rate, and
// another address is served throughout (docs/operations.md "Load
// balancer").
func TestHAProxyPerSourceLimits(t *testing.T) {
	haproxy := requireTool(t, "haproxy", "haproxy")
	n := startStack(t, stackOptions{})
	certFile, keyFile, pool := selfSigned(t)
	var pem []byte
	for _, f := range []string{certFile, keyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pem = append(pem, b...)
	}
	dir := t.TempDir()
	rw := haproxyRewrite{tlsCert: dir + "/frontend.pem", statsSocket: dir + "/stats.sock"}
	if err := os.WriteFile(rw.tlsCert, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	addr := startHAProxy(t, haproxy, haproxyConfigWith(t, rw, n, n), logs)

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	served := func(when string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/v1/chat/completions", strings.NewReader(chat))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("127.0.0.1 %s: %v\nhaproxy:\n%s", when, err, logs.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("127.0.0.1 %s: status %d: %s", when, resp.StatusCode, body)
		}
	}
	served("before the floods")

	// From 127.0.0.2, connections reset as soon as they are open, as fast
	// as they go (what a request-then-reset flood does at the connection
	// level; TLS would only slow the test down), then one more with a
	// TLS handshake and a request: closed at accept.
	const conns = 300
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for range conns {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			continue // reset by HAProxy before the dial returned: refused
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	}
	if c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}); err == nil {
		c.Close()
		t.Errorf("after %d connections from 127.0.0.2 at once, HAProxy accepted one more; want it closed at accept", conns)
	}
	served("after the HTTP/1.1 flood")

	// The HTTP/2 rapid reset from 127.0.0.3. A dropped connection says
	// nothing: the guard closes it so that the flood returns.
	const streams = 5000
	f, err := tryRapidResetFrom(&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}}, addr, pool)
	if err != nil {
		t.Fatal(err)
	}
	guard := time.AfterFunc(5*time.Second, func() { _ = f.conn.Close() })
	sent := f.flood(addr, "/v1/chat/completions", limitedKey, chat, time.Hour, streams)
	guard.Stop()
	f.close()
	if sent >= streams {
		t.Errorf("the rapid reset sent all its %d streams on one connection, want it dropped past the request rate", sent)
	}
	served("after the HTTP/2 flood")
	t.Logf("HTTP/2: %d streams before the connection was dropped; %s", sent, haproxyStats(rw.statsSocket))
}
