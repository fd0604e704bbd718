package gateway

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/logbuf"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
)

// allowAll is a hand-written fake Authenticator.
type allowAll struct{}

func (allowAll) Authenticate(http.Header, []string, time.Time) (*authz.Principal, error) {
	return &authz.Principal{KeyID: "k", TenantID: "t"}, nil
}

// newHandler builds a Handler in front of a fake provider, reached with a
// plain transport: these tests are about the request path; egress has its
// own tests and the app package tests the assembled node. Models: "gpt"
// (OpenAI), "claude" (Anthropic), "gpt-raw" on an OpenAI backend with
// include_usage = false, and "gpt-all" and "claude-all" on backends that
// serve every endpoint of their protocol.
func newHandler(tb testing.TB, o Options) (*Handler, *fakeprovider.Provider) {
	tb.Helper()
	return newHandlerWith(tb, o, fakeprovider.Options{})
}

// newHandlerWith is newHandler with a provider configured by po.
func newHandlerWith(tb testing.TB, o Options, po fakeprovider.Options) (*Handler, *fakeprovider.Provider) {
	tb.Helper()
	prov := fakeprovider.New(po)
	base, err := prov.Start("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { prov.Close() })
	return newHandlerAt(tb, o, base), prov
}

// postChat posts body to the chat completions endpoint of the node at
// base and returns its answer with the body read whole (closed). A read
// error is not checked: several tests expect a cut stream.
func postChat(tb testing.TB, base, body string) (*http.Response, []byte) {
	tb.Helper()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// newHandlerAt is newHandler in front of the provider at base.
func newHandlerAt(tb testing.TB, o Options, base string) *Handler {
	tb.Helper()
	doc := `node_id = "n"
[[egress.proxies]]
name = "p"
url = "socks5://127.0.0.1:1080"
[credentials.c]
env = "K"
hosts = ["127.0.0.1"]
[backends.oa]
protocol = "openai"
base_url = "` + base + `"
credential = "c"
max_inflight_per_node = 1000
[backends.an]
protocol = "anthropic"
base_url = "` + base + `"
credential = "c"
max_inflight_per_node = 1000
[backends.oa-raw]
protocol = "openai"
base_url = "` + base + `"
credential = "c"
max_inflight_per_node = 1000
include_usage = false
[backends.oa-all]
protocol = "openai"
base_url = "` + base + `"
credential = "c"
max_inflight_per_node = 1000
endpoints = ["chat_completions", "responses", "embeddings", "completions", "rerank", "audio_speech", "audio_transcriptions", "audio_translations", "image_generations", "image_edits"]
[backends.an-all]
protocol = "anthropic"
base_url = "` + base + `"
credential = "c"
max_inflight_per_node = 1000
endpoints = ["messages", "count_tokens"]
[backends.gm]
protocol = "gemini"
base_url = "` + strings.TrimSuffix(base, "/v1") + `/v1beta"
credential = "c"
max_inflight_per_node = 1000
endpoints = ["generate_content", "stream_generate_content", "gemini_count_tokens", "embed_content", "batch_embed_contents"]
[backends.oa-rt]
protocol = "openai"
base_url = "` + base + `"
credential = "c"
max_inflight_per_node = 100000
endpoints = ["realtime"]
[models.rt]
[[models.rt.targets]]
backend = "oa-rt"
model = "provider-rt"
weight = 1
[backends.gm-live]
protocol = "gemini"
base_url = "` + strings.TrimSuffix(base, "/v1") + `/v1beta"
credential = "c"
max_inflight_per_node = 100000
endpoints = ["bidi_generate_content"]
[models.live]
[[models.live.targets]]
backend = "gm-live"
model = "provider-live"
weight = 1
[models.gemini]
[[models.gemini.targets]]
backend = "gm"
model = "provider-gemini"
weight = 1
stream = true
[models.gpt-all]
[[models.gpt-all.targets]]
backend = "oa-all"
model = "provider-gpt"
weight = 1
stream = true
[models.claude-all]
[[models.claude-all.targets]]
backend = "an-all"
model = "provider-claude"
weight = 1
stream = true
[models.gpt]
[[models.gpt.targets]]
backend = "oa"
model = "provider-gpt"
weight = 1
stream = true
[models.gpt-raw]
[[models.gpt-raw.targets]]
backend = "oa-raw"
model = "provider-gpt"
weight = 1
stream = true
[models.claude]
[[models.claude.targets]]
backend = "an"
model = "provider-claude"
weight = 1
stream = true
[authz]
source = "file:/dev/null"
`
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
	if o.BodyLimit == 0 {
		o.BodyLimit = 1 << 20
	}
	if o.FirstByte == 0 {
		o.FirstByte = 5 * time.Second
	}
	if o.StreamIdle == 0 {
		o.StreamIdle = 5 * time.Second
	}
	if o.NonStreamTotal == 0 {
		o.NonStreamTotal = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.MaxAttempts = 2
	return New(o)
}

func TestKeepaliveDuringSilence(t *testing.T) {
	tests := []struct {
		name, path, body, ping string
	}{
		{"openai comment", "/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"a b [[event_delay_ms=150]] [[chunks=2]]"}]}`, ": keepalive\n\n"},
		{"anthropic ping", "/v1/messages", `{"model":"claude","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"a b [[event_delay_ms=150]] [[chunks=2]]"}]}`, "event: ping\ndata: {\"type\": \"ping\"}\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newHandler(t, Options{StreamKeepalive: 10 * time.Millisecond})
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			got := string(data)
			if !strings.Contains(got, tt.ping) {
				t.Fatalf("no keepalive in a stream with 150ms gaps and a 10ms keepalive:\n%s", got)
			}
			if !strings.Contains(got, "[DONE]") && !strings.Contains(got, "message_stop") {
				t.Fatalf("stream did not finish:\n%s", got)
			}
		})
	}
}

func TestNoKeepaliveByDefault(t *testing.T) {
	h, _ := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, data := postChat(t, srv.URL, `{"model":"gpt","stream":true,"messages":[{"role":"user","content":"a [[event_delay_ms=50]]"}]}`)
	if strings.Contains(string(data), "keepalive") {
		t.Fatalf("keepalive sent while disabled:\n%s", data)
	}
}

// BenchmarkNonStream measures one non-stream request on each JSON path
// (OpenAI chat, Anthropic messages, Responses) three ways in one run:
// straight from the client to the fake provider ("direct"), through a
// bare httputil.ReverseProxy hop ("hop"), and through the handler wired
// as the node wires it ("node": the node's log handler into a batching
// writer, metrics, usage events encoded and appended). Besides ns/op it
// reports cpu-ns/op, the CPU time of the whole process per request:
// (node − direct) ÷ (hop − direct) is the handler's own CPU against the
// hop's, the ratio the load harness measures between processes. The
// allocations are exact; node − hop is what the handler allocates beyond
// the hop.
func BenchmarkNonStream(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	logOut := logbuf.New(io.Discard, logbuf.Options{})
	defer logOut.Close()
	h, _ := newHandler(b, Options{
		Logger:    slog.New(logline.NewHandler(logOut, nil)), // the node's
		Observer:  m,
		Recorders: []Recorder{m, usage.NewRecorder(&discardAppender{}, 0)},
		NodeID:    "bench-node",
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	run := func(b *testing.B, url, payload string) {
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(payload))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer client-key")
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	}
	for _, p := range benchPaths {
		mod, _ := h.o.Routes.Load().Model(p.model)
		spec, _ := catalog.ByPath(p.path)
		target, err := url.Parse(mod.Pools[spec.Endpoint][0].Backend.URL[spec.Endpoint])
		if err != nil {
			b.Fatal(err)
		}
		hop := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = target
			r.Out.Header.Set("Authorization", "Bearer provider-key")
		}})
		defer hop.Close()
		hopBody := p.hopBody()
		b.Run(p.name+"/direct", func(b *testing.B) { run(b, target.String(), hopBody) })
		b.Run(p.name+"/hop", func(b *testing.B) { run(b, hop.URL, hopBody) })
		b.Run(p.name+"/node", func(b *testing.B) { run(b, srv.URL+p.path, p.body) })
	}
}

// discardAppender copies each payload, as the outbox does, and forgets it.
type discardAppender struct {
	mu  sync.Mutex
	buf []byte
}

func (d *discardAppender) Append(p []byte) bool {
	d.mu.Lock()
	d.buf = append(d.buf[:0], p...)
	d.mu.Unlock()
	return true
}

func (d *discardAppender) AppendNotSent(p []byte) bool { return d.Append(p) }

func provURL(tb testing.TB, h *Handler) string {
	tb.Helper()
	m, _ := h.o.Routes.Load().Model("gpt")
	return m.Pools[provider.Chat][0].Backend.URL[provider.Chat]
}

// TestSlowBodyTimesOut: a body trickled slower than the read timeout
// allows gets 408 and nothing reaches the provider (docs/api.md "Body limit").
func TestSlowBodyTimesOut(t *testing.T) {
	h, prov := newHandler(t, Options{BodyReadTimeout: 200 * time.Millisecond})
	srv := httptest.NewServer(h)
	defer srv.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		// The first bytes, then silence: the client never finishes.
		_, _ = pw.Write([]byte(`{"model":"gpt","messages":[`))
	}()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", pr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	if n := prov.RequestCount(); n != 0 {
		t.Fatalf("provider received %d requests, want 0", n)
	}
}

func TestErrorTextDropsURL(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "https://api.example/v1/chat/completions?token=secret", Err: io.ErrUnexpectedEOF}
	got := errorText(fmt.Errorf("attempt: %w", err))
	if strings.Contains(got, "token") || strings.Contains(got, "://") || !strings.Contains(got, "unexpected EOF") {
		t.Fatalf("errorText = %q", got)
	}
}

// BenchmarkStream measures one stream relayed by the handler against the
// same stream relayed by a bare httputil.ReverseProxy hop (FlushInterval
// -1), both in front of the fake provider over loopback, on each stream
// path: OpenAI chat (role, 20 content chunks, finish, usage, [DONE]),
// Anthropic messages (message_start, content blocks, 20 deltas,
// message_delta, message_stop) and OpenAI Responses (created, 20 deltas,
// completed). Each path's hop runs beside the handler in the same run: the
// ratio is what the handler's stream path costs beyond a proxy hop,
// without the egress proxy and the machine noise of the load harness.
// The handler is wired as the node wires it (log, metrics, usage events).
// cpu-ns/op is the CPU time of the whole test process (client, relay, fake
// provider) per stream; "direct" is the client reading the provider with no
// relay, so a relay's own CPU is its cpu-ns/op minus direct's. writes/op
// counts the relay's writes to the client connection (direct: none).
func BenchmarkStream(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	logOut := logbuf.New(io.Discard, logbuf.Options{})
	defer logOut.Close()
	h, _ := newHandler(b, Options{ // wired as the node wires it, as in BenchmarkNonStream
		Logger:    slog.New(logline.NewHandler(logOut, nil)),
		Observer:  m,
		Recorders: []Recorder{m, usage.NewRecorder(&discardAppender{}, 0)},
		NodeID:    "bench-node",
	})
	var writes atomic.Int64
	serve := func(h http.Handler) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		s.Listener = countingListener{Listener: s.Listener, writes: &writes}
		s.Start()
		return s
	}
	srv := serve(h)
	defer srv.Close()
	table := h.o.Routes.Load()
	upstreamURL := func(model string, ep provider.Endpoint) *url.URL {
		m, _ := table.Model(model)
		u, err := url.Parse(m.Pools[ep][0].Backend.URL[ep])
		if err != nil {
			b.Fatal(err)
		}
		return u
	}
	paths := []struct {
		name, path, model, provider, body, done string
		ep                                      provider.Endpoint
	}{
		{"chat", "/v1/chat/completions", `"gpt"`, `"provider-gpt"`,
			`{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"[[chunks=20]]"}]}`,
			"[DONE]", provider.Chat},
		{"messages", "/v1/messages", `"claude"`, `"provider-claude"`,
			`{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"[[chunks=20]]"}]}`,
			"message_stop", provider.Messages},
		{"responses", "/v1/responses", `"gpt-all"`, `"provider-gpt"`,
			`{"model":"gpt-all","stream":true,"input":"[[chunks=20]]"}`,
			"response.completed", provider.Responses},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	run := func(b *testing.B, url, payload, done string) {
		b.ReportAllocs()
		cpu, w0 := cpuTime(b), writes.Load()
		for b.Loop() {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(payload))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(data, []byte(done)) {
				b.Fatalf("status %d, %d bytes", resp.StatusCode, len(data))
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(writes.Load()-w0)/float64(b.N), "writes/op")
	}
	for _, p := range paths {
		target := upstreamURL(strings.Trim(p.model, `"`), p.ep)
		hop := serve(&httputil.ReverseProxy{
			Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL = target },
			FlushInterval: -1,
		})
		b.Run(p.name+"/direct", func(b *testing.B) {
			run(b, target.String(), strings.Replace(p.body, p.model, p.provider, 1), p.done)
		})
		b.Run(p.name+"/reverse-proxy-hop", func(b *testing.B) {
			run(b, hop.URL, strings.Replace(p.body, p.model, p.provider, 1), p.done)
		})
		b.Run(p.name+"/through-handler", func(b *testing.B) {
			run(b, srv.URL+p.path, p.body, p.done)
		})
		hop.Close()
	}
}

// BenchmarkNonStreamHandler is BenchmarkNonStream without the network:
// the handler and a bare httputil.ReverseProxy each serve the request in
// the benchmark's goroutine, through a transport that answers with the
// fake provider's recorded answer (its headers and body) at once. ns/op
// and cpu-ns/op (the process's CPU time per request, garbage collection
// included, waits for a CPU excluded) are then each handler's own cost,
// beside the other's in the same run, free of the client, the server
// connection and the scheduler.
func BenchmarkNonStreamHandler(b *testing.B) {
	h := wiredHandler(b)
	real := h.o.Transport
	for _, p := range benchPaths {
		target, header, body := recordAnswer(b, h, real, p.path, p.model, p.hopBody())
		canned := &cannedTransport{header: header, body: body}
		h.o.Transport = canned
		hop := &httputil.ReverseProxy{Transport: canned, Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = target
			r.Out.Header.Set("Authorization", "Bearer provider-key")
		}}
		run := func(b *testing.B, handler http.Handler, body string) {
			b.ReportAllocs()
			w := &benchWriter{}
			cpu := cpuTime(b)
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, p.path, strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Authorization", "Bearer client-key")
				r.Header.Set("Anthropic-Version", "2023-06-01")
				w.reset()
				handler.ServeHTTP(w, r)
				if w.status != 200 {
					b.Fatalf("status %d", w.status)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		}
		b.Run(p.name+"/hop", func(b *testing.B) { run(b, hop, p.hopBody()) })
		b.Run(p.name+"/node", func(b *testing.B) { run(b, h, p.body) })
	}
}

// benchPaths are the JSON paths the non-stream benchmarks run.
var benchPaths = []benchPath{
	{"chat", "/v1/chat/completions", "gpt", `{"model":"gpt","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}],"temperature":0.2}`},
	{"messages", "/v1/messages", "claude", `{"model":"claude","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hello there"}]}`},
	{"responses", "/v1/responses", "gpt-all", `{"model":"gpt-all","instructions":"be brief","input":"hello there","store":false}`},
}

type benchPath struct{ name, path, model, body string }

// hopBody is the body with the provider's model name, as the node sends it.
func (p benchPath) hopBody() string {
	return strings.Replace(p.body, `"`+p.model+`"`, `"provider-`+strings.TrimSuffix(p.model, "-all")+`"`, 1)
}

// cannedTransport answers every request with one recorded answer after
// reading the request body, as a provider would.
type cannedTransport struct {
	header http.Header
	body   []byte
}

func (c *cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: c.header.Clone(), Body: io.NopCloser(bytes.NewReader(c.body)),
		ContentLength: int64(len(c.body)), Request: r,
	}, nil
}

// benchWriter is a reusable ResponseWriter that keeps nothing.
type benchWriter struct {
	h      http.Header
	status int
}

func (w *benchWriter) reset() {
	if w.h == nil {
		w.h = http.Header{}
	}
	clear(w.h)
	w.status = 0
}

func (w *benchWriter) Header() http.Header { return w.h }

func (w *benchWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	w.WriteHeader(200)
	return len(p), nil
}
