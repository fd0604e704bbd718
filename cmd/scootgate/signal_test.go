package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// Signals end to end (docs/operations.md "Drain"): the real
// binary, started as a child process, drains on the first SIGTERM and exits
// at once on a second signal.

const signalTestKey = "pk-canary-signal-3e9d1a"

// buildBinary compiles this command into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	exe := filepath.Join(t.TempDir(), "scootgate")
	out, err := exec.CommandContext(t.Context(), goBin, "build", "-o", exe, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// freePort returns a loopback port nothing listened on a moment ago.
// startProviderAndProxy starts prov and an in-process SOCKS5 egress proxy
// on loopback, both closed when the test ends, and returns the provider's
// base URL and the proxy's address.
func startProviderAndProxy(t *testing.T, prov *fakeprovider.Provider) (provURL, socksAddr string) {
	t.Helper()
	provURL, err := prov.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prov.Close() })
	socks, socksAddr, err := socks5proxy.Listen("127.0.0.1:0", socks5proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = socks.Close() })
	return provURL, socksAddr
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// writeConfig writes a minimal valid node config into dir: a dead SOCKS
// proxy (no request can leave, none is sent) and a file authz source.
func writeConfig(t *testing.T, dir, api, health, drainDelay string) string {
	t.Helper()
	doc := authsnap.Snapshot{Schema: authsnap.Schema, Version: 1, Keys: []authsnap.Key{
		{KeyID: "k-1", TenantID: "t-1", Digest: authsnap.Digest("sk-signal-test-client")},
	}}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authz.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`node_id = "signal-test"
[listen]
api = %q
health = %q
[drain]
delay = %q
grace = "5s"
[limits]
# A busy test machine's scheduling waits would read as this node's own
# overload and shed the requests these tests look at.
shed_wait = "0s"
[[egress.proxies]]
name = "dead"
url = "socks5://%s"
[credentials.c]
env = "SG_SIGNAL_TEST_KEY"
hosts = ["127.0.0.1"]
[backends.b]
protocol = "openai"
base_url = "http://127.0.0.1:1/v1"
credential = "c"
max_inflight_per_node = 1
[models.m]
[[models.m.targets]]
backend = "b"
model = "m"
weight = 1
[authz]
source = "file:authz.json"
`, api, health, drainDelay, freePort(t))
	path := filepath.Join(dir, "scootgate.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// node is a running child process and its stderr log.
type node struct {
	cmd    *exec.Cmd
	health string
	exited chan struct{}
	err    error // of cmd.Wait; set before exited is closed

	mu      sync.Mutex
	log     strings.Builder // guarded by mu
	changed chan struct{}   // guarded by mu; closed and replaced on every line
}

func startNode(t *testing.T, exe, drainDelay string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{health: freePort(t), exited: make(chan struct{}), changed: make(chan struct{})}
	cfg := writeConfig(t, dir, freePort(t), n.health, drainDelay)
	n.cmd = exec.Command(exe, "run", "--config", cfg)
	n.cmd.Env = []string{"SG_SIGNAL_TEST_KEY=" + signalTestKey}
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() { // owned: ends at stderr EOF, when the process exits
		defer close(read)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			n.mu.Lock()
			n.log.WriteString(sc.Text() + "\n")
			close(n.changed)
			n.changed = make(chan struct{})
			n.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { // owned: ends when the process exits
		// Wait closes the pipe, so it runs only after every line was read
		// (exec.Cmd.StderrPipe): the node's last lines come at exit.
		<-read
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Kill() // only the child this test started
			<-n.exited
		}
		if strings.Contains(n.output(), signalTestKey) {
			t.Errorf("the provider key appeared in the node's log")
		}
	})
	return n
}

func (n *node) output() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log.String()
}

// waitLog blocks until the log contains substr, or fails after d.
func (n *node) waitLog(t *testing.T, substr string, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		n.mu.Lock()
		found, changed := strings.Contains(n.log.String(), substr), n.changed
		n.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-n.exited:
			t.Fatalf("node exited before logging %q:\n%s", substr, n.output())
		case <-timer.C:
			t.Fatalf("node did not log %q within %v:\n%s", substr, d, n.output())
		}
	}
}

// waitExit fails the test unless the process exits within d.
func (n *node) waitExit(t *testing.T, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-n.exited:
	case <-timer.C:
		t.Fatalf("node still running %v after the signal:\n%s", d, n.output())
	}
}

func (n *node) get(t *testing.T, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + n.health + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (n *node) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func TestSignals(t *testing.T) {
	exe := buildBinary(t)

	t.Run("one SIGTERM drains and exits cleanly", func(t *testing.T) {
		n := startNode(t, exe, "0s")
		n.waitLog(t, `"msg":"node started"`, 20*time.Second)
		if code := n.get(t, "/healthz"); code != 200 {
			t.Fatalf("/healthz = %d, want 200", code)
		}
		n.signal(t, syscall.SIGTERM)
		n.waitExit(t, 10*time.Second)
		if n.err != nil {
			t.Fatalf("exit after one SIGTERM: %v, want status 0\n%s", n.err, n.output())
		}
		if !strings.Contains(n.output(), `"msg":"node stopped"`) {
			t.Fatalf("no orderly stop in the log:\n%s", n.output())
		}
	})

	// drain.delay is a minute: only the second signal can end it quickly.
	for name, second := range map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT} {
		t.Run("second "+name+" exits at once", func(t *testing.T) {
			n := startNode(t, exe, "1m")
			n.waitLog(t, `"msg":"node started"`, 20*time.Second)
			n.signal(t, syscall.SIGTERM)
			n.waitLog(t, `"msg":"draining"`, 10*time.Second)
			if code := n.get(t, "/readyz"); code != http.StatusServiceUnavailable {
				t.Fatalf("/readyz while draining = %d, want 503", code)
			}
			n.signal(t, second)
			n.waitExit(t, 5*time.Second)
			var ee *exec.ExitError
			if !errors.As(n.err, &ee) {
				t.Fatalf("exit: %v, want death by %v", n.err, second)
			}
			ws, ok := ee.Sys().(syscall.WaitStatus)
			if !ok || !ws.Signaled() || ws.Signal() != second {
				t.Fatalf("exit status %v, want death by %v", ee, second)
			}
		})
	}
}
