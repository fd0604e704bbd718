package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/logbuf"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/usage"
)

// shedSwitch is the node's load as a test sets it.
type shedSwitch struct{ on atomic.Bool }

func (s *shedSwitch) Shedding() bool { return s.on.Load() }

// TestShedRefusesAtOnce: while the node sheds (docs/failures.md
// "Shedding"), a request gets the node's own 503 with Retry-After and
// x-should-retry before anything reaches a provider, and its connection
// stays open for the next request; once it no longer sheds, the same
// connection is served as usual.
func TestShedRefusesAtOnce(t *testing.T) {
	h, prov := newHandler(t, Options{})
	var shed shedSwitch
	limited := LimitConcurrency(h, 100, slog.New(slog.DiscardHandler))
	limited.ShedWith(&shed)
	srv := httptest.NewServer(GuardBody(limited, time.Minute, time.Second))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()

	post := func() (*http.Response, string, bool) {
		t.Helper()
		var reused bool
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), reused
	}

	if resp, body, _ := post(); resp.StatusCode != http.StatusOK {
		t.Fatalf("before shedding: %d %s", resp.StatusCode, body)
	}
	shed.on.Store(true)
	resp, body, reused := post()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("X-Should-Retry") != "true" || !strings.Contains(body, "overloaded") {
		t.Fatalf("while shedding: %d, Retry-After %q, x-should-retry %q, %s; want 503, 1, true and the node's error",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry"), body)
	}
	if resp.Close || !reused {
		t.Errorf("shed on a new connection or closing it (reused %t, close %t)", reused, resp.Close)
	}
	if n := prov.RequestCount(); n != 1 {
		t.Errorf("the provider got %d requests, want 1 (none while shedding)", n)
	}
	shed.on.Store(false)
	resp, body, reused = post()
	if resp.StatusCode != http.StatusOK || !reused {
		t.Fatalf("after shedding: %d (connection reused %t) %s; want 200 on the same connection", resp.StatusCode, reused, body)
	}
	if _, _, refused := limited.Stats(); refused != 1 {
		t.Errorf("refused %d, want 1", refused)
	}
}

// BenchmarkShed prices a refusal while shedding against a served request,
// both behind the node's middlewares (GuardBody, the concurrency limit)
// with the handler wired as the node wires it, on kept-alive connections:
// "served" is a chat completion through the handler to the fake provider,
// "shed" the same request refused, "direct" the client straight to the
// provider. cpu-ns/op is the whole process (client and provider
// included): a refusal's own CPU is shed − the client's share, a served
// request's is served − direct, as in BenchmarkNonStream.
func BenchmarkShed(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	logOut := logbuf.New(io.Discard, logbuf.Options{})
	defer logOut.Close()
	h, _ := newHandler(b, Options{
		Logger:    slog.New(logline.NewHandler(logOut, nil)),
		Observer:  m,
		Recorders: []Recorder{m, usage.NewRecorder(&discardAppender{}, 0)},
		NodeID:    "bench-node",
	})
	var shed shedSwitch
	limited := LimitConcurrency(h, 10000, slog.New(slog.DiscardHandler))
	limited.ShedWith(&shed)
	srv := httptest.NewServer(GuardBody(limited, time.Minute, 5*time.Second))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	p := benchPaths[0]
	run := func(b *testing.B, url, payload string, want int) {
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(payload))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer client-key")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				b.Fatalf("status %d, want %d", resp.StatusCode, want)
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	}
	b.Run("direct", func(b *testing.B) { run(b, provURL(b, h), p.hopBody(), http.StatusOK) })
	b.Run("served", func(b *testing.B) {
		shed.on.Store(false)
		run(b, srv.URL+p.path, p.body, http.StatusOK)
	})
	b.Run("shed", func(b *testing.B) {
		shed.on.Store(true)
		defer shed.on.Store(false)
		run(b, srv.URL+p.path, p.body, http.StatusServiceUnavailable)
	})
}
