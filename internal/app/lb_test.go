package app

import (
	"bytes"
	"context"
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
// Every timeout, check and retry setting
// is the example's.
func haproxyConfig(t *testing.T, nodes ...*stack) string {
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
	servers := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
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
	dir := t.TempDir()
	cfgPath := dir + "/haproxy.cfg"
	if err := os.WriteFile(cfgPath, []byte(haproxyConfig(t, n1, n2)), 0o600); err != nil {
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
	lbURL := "http://" + ln.Addr().String()
	ln.Close() // the duplicate in lnFile stays open for HAProxy
	check := exec.Command(haproxy, "-c", "-f", cfgPath)
	check.ExtraFiles = []*os.File{lnFile}
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(haproxy, "-f", cfgPath, "-db")
	cmd.ExtraFiles = []*os.File{lnFile}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lnFile.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	var (
		mu       sync.Mutex
		failures []string
		served   int
	)
	send := func(client *http.Client) {
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
	client := &http.Client{Timeout: 30 * time.Second}
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
			c := &http.Client{Timeout: 30 * time.Second}
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
