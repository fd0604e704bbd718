package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestSecondSignalRecordsInFlight: streams are open (the provider sent
// its first event, then thinks for a minute) when the node gets SIGTERM
// (a one-minute drain.delay keeps them running) and then a second
// SIGTERM. The process still dies by the signal within the bound, and the
// outbox it leaves holds one usage event per open stream, with failure
// stage shutdown, and each client got the in-band error. Before, the
// second signal killed the process at once and those events were lost.
func TestSecondSignalRecordsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	exe := buildBinary(t)
	prov := fakeprovider.New(fakeprovider.Options{OpenAIKey: crashProviderKey})
	provURL, socksAddr := startProviderAndProxy(t, prov)
	dir := t.TempDir()
	api, health := freePort(t), freePort(t)
	writeCrashConfig(t, dir, crashConfig{api: api, health: health, provider: provURL, egress: "socks5://" + socksAddr, delay: "1m"})

	n := startCrashNode(t, exe, dir, health, 0)
	n.waitReady(t, 20*time.Second)
	const streams = 4
	bodies := make(chan *bufio.Reader, streams)
	for range streams {
		body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"think [[chunks=4]] [[event_delay_ms=60000]]"}]}`, crashModel)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+api+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+crashKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream: status %d", resp.StatusCode)
		}
		rd := bufio.NewReader(resp.Body)
		if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("first event: %q, %v", line, err)
		}
		bodies <- rd
	}

	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitOutput(t, `"msg":"draining"`, 10*time.Second)
	sent := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	timer := time.NewTimer(abortBound + 5*time.Second)
	defer timer.Stop()
	select {
	case <-n.exited:
	case <-timer.C:
		t.Fatalf("node still running %v after the second SIGTERM", abortBound+5*time.Second)
	}
	took := time.Since(sent)
	if ws, ok := n.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("exit status %v, want death by SIGTERM", n.cmd.ProcessState)
	}
	t.Logf("second SIGTERM to exit: %v", took.Round(time.Millisecond))

	st, err := outbox.Open(outbox.Options{Path: filepath.Join(dir, "outbox.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Read(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != streams {
		t.Fatalf("outbox holds %d events after the second signal, want %d (one per open stream)", len(recs), streams)
	}
	for _, rec := range recs {
		ev, err := usageevent.Decode(rec.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if !ev.Stream || ev.FailureStage != usageevent.StageShutdown || ev.ResponseBytes == 0 {
			t.Errorf("event of a stream cut by the second signal: stream %v, failure_stage %q, response_bytes %d; want a stream, %q, the bytes seen",
				ev.Stream, ev.FailureStage, ev.ResponseBytes, usageevent.StageShutdown)
		}
	}
	close(bodies)
	for rd := range bodies {
		rest, _ := io.ReadAll(rd) // the connection ends with the process
		if !bytes.Contains(rest, []byte("node_shutting_down")) || bytes.Contains(rest, []byte("[DONE]")) {
			t.Errorf("a stream cut by the second signal ended with %q; want the in-band error and no [DONE]", rest)
		}
	}
}

// waitOutput polls the node's log for substr.
func (n *crashNode) waitOutput(t *testing.T, substr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(n.output(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("node did not log %q within %v:\n%s", substr, d, tail(n.output(), 3000))
		}
		time.Sleep(10 * time.Millisecond) // polling an external process's log
	}
}
