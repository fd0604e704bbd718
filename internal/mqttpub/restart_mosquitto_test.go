package mqttpub

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// privateMosquitto runs a Mosquitto of its own (not the shared CI one,
// which other tests use) on a loopback port, so that this test can stop
// and start it. It runs where the CI Mosquitto runs: with
// SCOOTGATE_MOSQUITTO_ADDR set and the binary installed.
type privateMosquitto struct {
	bin, conf, addr string

	mu  sync.Mutex
	cmd *exec.Cmd // guarded by mu; nil when stopped
}

func newPrivateMosquitto(t *testing.T) *privateMosquitto {
	t.Helper()
	if os.Getenv("SCOOTGATE_MOSQUITTO_ADDR") == "" {
		t.Skip("SKIPPED: no Mosquitto in this environment (SCOOTGATE_MOSQUITTO_ADDR unset; scripts/ci-mosquitto.sh)")
	}
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin = "/usr/sbin/mosquitto"
		if _, err := os.Stat(bin); err != nil {
			t.Fatal("SCOOTGATE_MOSQUITTO_ADDR is set but the mosquitto binary is not installed")
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // mosquitto may drop to its own user
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\n", port)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &privateMosquitto{bin: bin, conf: conf, addr: addr}
	t.Cleanup(m.stop)
	return m
}

// start runs the broker and returns once it accepts connections.
func (m *privateMosquitto) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(m.bin, "-c", m.conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.cmd = cmd
	m.mu.Unlock()
	eventually(t, "mosquitto listening on "+m.addr, func() bool {
		c, err := net.DialTimeout("tcp", m.addr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// stop kills the broker (only the process this test started) and waits.
func (m *privateMosquitto) stop() {
	m.mu.Lock()
	cmd := m.cmd
	m.cmd = nil
	m.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// TestReconnectAfterMosquittoRestart is TestReconnectAfterBrokerRestart
// against a real Mosquitto process that is killed and started again on
// the same port.
func TestReconnectAfterMosquittoRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("waits through real backoffs (~6 s)")
	}
	m := newPrivateMosquitto(t)
	m.start(t)
	topic := uniqueTopic(t)
	src := newFakeSource()
	o := testOptions(m.addr, topic)
	o.BackoffMin, o.BackoffMax = 0, 0 // the defaults under test
	o.Rand = func() float64 { return 0.999 }
	p := newPublisher(t, src, o)
	var (
		wmu   sync.Mutex
		waits []time.Duration
	)
	waitStarted := make(chan int, 64)
	p.wait = func(ctx context.Context, d time.Duration) bool {
		wmu.Lock()
		waits = append(waits, d)
		n := len(waits)
		wmu.Unlock()
		waitStarted <- n
		return sleep(ctx, d)
	}
	start(t, p)
	src.add([]byte("before"))
	eventually(t, "the first row acknowledged", func() bool { return src.pending() == 0 })

	m.stop()
	src.add([]byte("during"))
	for n := 0; n < 5; { // the lost connection, then four failed connects
		n = recv(t, waitStarted)
	}
	back := time.Now()
	m.start(t)
	eventually(t, "the row appended while the broker was down acknowledged", func() bool { return src.pending() == 0 })
	resumed := time.Since(back)
	t.Logf("delivery resumed %v after Mosquitto was back", resumed.Round(time.Millisecond))
	wmu.Lock()
	defer wmu.Unlock()
	for i, d := range waits {
		if d > 2*time.Second {
			t.Errorf("wait %d was %v; the cap is 2s", i+1, d)
		}
	}
	if resumed > 3*time.Second {
		t.Errorf("delivery resumed %v after Mosquitto was back; want about 2s at most", resumed)
	}
}
