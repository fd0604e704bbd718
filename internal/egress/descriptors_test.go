package egress

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
)

// descriptorsEnv selects the proxy kind TestOutOfDescriptorsChild dials
// through.
const descriptorsEnv = "SCOOTGATE_EGRESS_OUT_OF_DESCRIPTORS"

// TestOutOfDescriptorsIsNodeFault: a dial that fails because the node has
// no file descriptor left is the node's own fault (StageNode), not the
// proxy's: no egress fault, no other proxy tried, no OnFailure report,
// and once descriptors are free again the same dialer works. The child
// runs under a low open-file limit set by the shell (ulimit -n), fills
// it with open files, and dials for real through an in-process proxy.
func TestOutOfDescriptorsIsNodeFault(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses sh's ulimit -n to give the child a small open-file limit")
	}
	for _, kind := range []string{"socks5", "connect"} {
		t.Run(kind, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`,
				os.Args[0], "-test.run=^TestOutOfDescriptorsChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), descriptorsEnv+"="+kind)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestOutOfDescriptorsChild") {
				t.Fatalf("child failed (%v):\n%s", err, out)
			}
		})
	}
}

// TestOutOfDescriptorsChild is the child of
// TestOutOfDescriptorsIsNodeFault.
func TestOutOfDescriptorsChild(t *testing.T) {
	kind := os.Getenv(descriptorsEnv)
	if kind == "" {
		t.Skip("helper process for TestOutOfDescriptorsIsNodeFault")
	}
	target := echoTarget(t)
	var u string
	switch kind {
	case "socks5":
		_, addr := startSOCKS(t, socks5proxy.Options{})
		u = "socks5://" + addr
	case "connect":
		_, addr := startConnect(t, connectproxy.Options{})
		u = "http://" + addr
	default:
		t.Fatalf("%s=%q: want socks5 or connect", descriptorsEnv, kind)
	}
	var mu sync.Mutex
	var reported []string
	d := newDialer(t, Options{
		Proxies: []Proxy{{Name: "first", URL: mustURL(t, u)}, {Name: "second", URL: mustURL(t, u)}},
		OnFailure: func(e *NotSentError) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, e.Proxy+"/"+e.Stage.String())
		},
	})

	// Take every descriptor the limit leaves.
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("opening files ended with %v, want EMFILE", err)
			}
			break
		}
		files = append(files, f)
		if len(files) > 1<<16 {
			t.Fatal("the open-file limit is not in effect")
		}
	}

	_, err := d.DialContext(t.Context(), "tcp", target)
	var ns *NotSentError
	if !errors.As(err, &ns) {
		t.Fatalf("dial with no descriptor left: %v, want a *NotSentError", err)
	}
	if ns.Stage != StageNode || !ns.NodeFault() || ns.EgressFault() || ns.Proxy != "first" {
		t.Errorf("stage %s (node fault %v, egress fault %v) via %q, want node, the node's fault, via first: %v",
			ns.Stage, ns.NodeFault(), ns.EgressFault(), ns.Proxy, err)
	}
	if !errors.Is(err, syscall.EMFILE) {
		t.Errorf("%v does not wrap EMFILE", err)
	}
	mu.Lock()
	if len(reported) != 0 {
		t.Errorf("OnFailure reported %v: the proxy is not to blame", reported)
	}
	mu.Unlock()

	// Descriptors free again: the same dialer opens a tunnel.
	for _, f := range files[len(files)-8:] {
		f.Close()
	}
	files = files[:len(files)-8]
	conn, err := d.DialContext(t.Context(), "tcp", target)
	if err != nil {
		t.Fatalf("dial once descriptors are free: %v", err)
	}
	conn.Close()
}
