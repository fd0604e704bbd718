package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
)

// TestSlotFreedWhenProviderEnds: clients that stop reading hold a
// backend's in-flight slots only while its provider is still sending.
// Two stream clients (capped backend: 2 slots) read nothing of a 160 KiB
// answer, more than their connections take in (the node's socket send
// buffer and the client's receive buffer are made small; over HTTP/2 the
// client's stream window is 64 KiB); the provider sends all of it and
// ends. Then another request is served although the stalled clients are
// still connected, far from being cut (stream_idle is a minute). Once the
// stalled clients read, they get their whole answers, their usage events
// say success, and the backend's count of requests in flight is back to
// 0 (the slot was given back once, not twice).
func TestSlotFreedWhenProviderEnds(t *testing.T) {
	const cap, size = 2, 160 << 10
	chunk := strings.Repeat("x", 1000)
	ended := make(chan struct{}, 16)
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for n := 0; n < size; n += len(chunk) {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", chunk)
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5,\"total_tokens\":8}}\n\ndata: [DONE]\n\n")
		ended <- struct{}{}
	}))
	defer prov.Close()
	const body = `{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[]}`

	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			rec := make(chanRecorder, 8)
			h, state := newCappedHandler(t, Options{StreamIdle: time.Minute, Recorders: []Recorder{rec}}, prov.URL+"/v1", cap)
			srv := httptest.NewUnstartedServer(h)
			srv.Listener = smallSendBuffers{srv.Listener}
			srv.EnableHTTP2 = h2
			defer srv.Close()
			var client *http.Client
			if h2 {
				srv.StartTLS()
				tr := &http.Transport{
					TLSClientConfig:   &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs},
					ForceAttemptHTTP2: true,
					HTTP2:             &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 1 << 20},
				}
				defer tr.CloseIdleConnections()
				client = &http.Client{Transport: tr}
			} else {
				srv.Start()
			}

			// The stalled clients: each has its headers, then reads nothing.
			var stalled []io.Reader
			for range cap {
				if h2 {
					resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
						t.Fatalf("%s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
					}
					stalled = append(stalled, resp.Body)
					continue
				}
				conn, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
				fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
				stalled = append(stalled, conn)
			}
			for range cap {
				<-ended // the provider sent its whole answer
			}
			// The node reads the rest of each answer from its socket and
			// gives the slot back: wait for that, bounded far below the
			// stalled clients' cut (a minute of stream_idle).
			deadline := time.Now().Add(10 * time.Second)
			for state.InFlight() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the backend still has %d requests in flight 10 s after the provider ended them", state.InFlight())
				}
				time.Sleep(5 * time.Millisecond)
			}
			// Another client is served while the stalled ones still wait.
			c := srv.Client()
			if h2 {
				c = client
			}
			resp, err := c.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(data), "data: [DONE]\n\n") {
				t.Fatalf("another client got %d %.200q while the stalled ones wait, want the whole stream", resp.StatusCode, data)
			}
			<-ended
			if ev := <-rec; ev.FailureStage != "" || ev.Usage.OutputTokens != 5 {
				t.Fatalf("the other client's usage event: stage %q, output tokens %d", ev.FailureStage, ev.Usage.OutputTokens)
			}

			// The stalled clients read at last: whole answers, and the
			// events of a success.
			for _, s := range stalled {
				if tc, ok := s.(*net.TCPConn); ok {
					_ = tc.SetReadBuffer(1 << 20) // tiny windows make loopback slow
				}
				data, err := io.ReadAll(bufio.NewReader(s))
				if err != nil || !strings.Contains(string(data), "data: [DONE]\n\n") {
					t.Fatalf("a stalled client read %d bytes ending %q (%v), want the whole stream", len(data), data[max(0, len(data)-40):], err)
				}
			}
			for range cap {
				select {
				case ev := <-rec:
					if ev.FailureStage != "" || ev.Usage.OutputTokens != 5 || ev.ResponseBytes < size {
						t.Fatalf("a stalled client's usage event: stage %q, output tokens %d, %d response bytes", ev.FailureStage, ev.Usage.OutputTokens, ev.ResponseBytes)
					}
				case <-time.After(10 * time.Second): // only when it fails
					t.Fatal("no usage event for a stalled client that read its answer")
				}
			}
			if n := state.InFlight(); n != 0 {
				t.Fatalf("backend in flight %d after every request ended, want 0", n)
			}
			if v := state.View(); v.BreakerState != upstream.BreakerClosed || v.ConsecutiveFailures != 0 {
				t.Fatalf("breaker %v with %d failures after successes", v.BreakerState, v.ConsecutiveFailures)
			}
		})
	}
}

// smallSendBuffers makes each accepted connection's socket send buffer
// small, so that a client that does not read blocks the node's writes
// after a few KiB rather than after what loopback's autotuning allows.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// newCappedHandler is a handler with one model, gpt, on one OpenAI
// backend at base that takes at most cap requests at a time; it returns
// the backend's hot state too.
func newCappedHandler(tb testing.TB, o Options, base string, cap int) (*Handler, *upstream.State) {
	tb.Helper()
	doc := fmt.Sprintf(`node_id = "n"
[[egress.proxies]]
name = "p"
url = "socks5://127.0.0.1:1080"
[credentials.c]
env = "K"
hosts = ["127.0.0.1"]
[backends.oa]
protocol = "openai"
base_url = %q
credential = "c"
max_inflight_per_node = %d
[models.gpt]
[[models.gpt.targets]]
backend = "oa"
model = "provider-gpt"
weight = 1
stream = true
[authz]
source = "file:/dev/null"
`, base, cap)
	cfg, err := config.Parse([]byte(doc), func(string) (string, bool) { return "provider-key", true }, os.ReadFile)
	if err != nil {
		tb.Fatal(err)
	}
	tab, err := routes.Compile(cfg.Backends, cfg.Models, cfg.Credentials, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		tb.Fatal(err)
	}
	var holder routes.Holder
	holder.Store(tab)
	if o.Auth == nil {
		o.Auth = allowAll{}
	}
	o.Routes, o.Picker = &holder, &balance.WeightedRandom{}
	o.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	o.BodyLimit, o.FirstByte, o.NonStreamTotal = 1<<20, 5*time.Second, 10*time.Second
	o.Logger = slog.New(slog.DiscardHandler)
	o.MaxAttempts = 1
	m, _ := tab.Model("gpt")
	return New(o), m.Pools[provider.Chat][0].Backend.State
}
