package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/logbuf"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/usage"
)

// BenchmarkStreamHandler is BenchmarkStream without the network: the
// handler (wired as the node wires it) and a bare httputil.ReverseProxy
// (FlushInterval -1) each relay one stream per op in the benchmark's
// goroutine, from a transport that replays the fake provider's recorded
// stream one event per read (as a provider that sends its events apart
// does, the load harness's case: nothing to coalesce), into a writer that
// keeps nothing. cpu-ns/op is then each relay's own CPU per stream,
// beside the other's in the same run; flushes/op counts the flushes.
func BenchmarkStreamHandler(b *testing.B) {
	h := wiredHandler(b)
	real := h.o.Transport
	paths := []struct {
		name, path, model, provider, body string
	}{
		{"chat", "/v1/chat/completions", "gpt", "provider-gpt",
			`{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"[[chunks=20]]"}]}`},
		{"messages", "/v1/messages", "claude", "provider-claude",
			`{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"[[chunks=20]]"}]}`},
		{"responses", "/v1/responses", "gpt-all", "provider-gpt",
			`{"model":"gpt-all","stream":true,"input":"[[chunks=20]]"}`},
	}
	for _, p := range paths {
		hopBody := strings.Replace(p.body, `"`+p.model+`"`, `"`+p.provider+`"`, 1)
		target, header, recorded := recordAnswer(b, h, real, p.path, p.model, hopBody)
		canned := &cannedStream{header: header, events: bytes.SplitAfter(recorded, []byte("\n\n"))}
		h.o.Transport = canned
		hop := &httputil.ReverseProxy{Transport: canned, FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = target
			r.Out.Header.Set("Authorization", "Bearer provider-key")
		}}
		run := func(b *testing.B, handler http.Handler, body string) {
			b.ReportAllocs()
			w := &flushWriter{}
			cpu := cpuTime(b)
			flushes := 0
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, p.path, strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Authorization", "Bearer client-key")
				r.Header.Set("Anthropic-Version", "2023-06-01")
				w.reset()
				handler.ServeHTTP(w, r)
				if w.status != 200 || w.n != len(recorded) {
					b.Fatalf("status %d, %d bytes, want 200 and %d", w.status, w.n, len(recorded))
				}
				flushes += w.flushes
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(flushes)/float64(b.N), "flushes/op")
		}
		b.Run(p.name+"/hop", func(b *testing.B) { run(b, hop, hopBody) })
		b.Run(p.name+"/node", func(b *testing.B) { run(b, h, p.body) })
	}
}

// cannedStream answers every request with a recorded event stream, one
// event per Read, after reading the request body.
type cannedStream struct {
	header http.Header
	events [][]byte
}

func (c *cannedStream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: c.header.Clone(), Body: &eventBody{events: slices.Clone(c.events)},
		ContentLength: -1, Request: r,
	}, nil
}

// eventBody returns one event per Read.
type eventBody struct{ events [][]byte }

func (e *eventBody) Read(p []byte) (int, error) {
	for len(e.events) > 0 && len(e.events[0]) == 0 {
		e.events = e.events[1:]
	}
	if len(e.events) == 0 {
		return 0, io.EOF
	}
	n := copy(p, e.events[0])
	e.events[0] = e.events[0][n:]
	return n, nil
}

func (e *eventBody) Close() error { return nil }

// flushWriter is a reusable ResponseWriter that keeps nothing but counts
// bytes and flushes.
type flushWriter struct {
	h       http.Header
	status  int
	n       int
	flushes int
}

func (w *flushWriter) reset() {
	if w.h == nil {
		w.h = http.Header{}
	}
	clear(w.h)
	w.status, w.n, w.flushes = 0, 0, 0
}

func (w *flushWriter) Header() http.Header { return w.h }

func (w *flushWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *flushWriter) Write(p []byte) (int, error) {
	w.WriteHeader(200)
	w.n += len(p)
	return len(p), nil
}

func (w *flushWriter) Flush() { w.flushes++ }

// wiredHandler is the handler as the node wires it, for the in-process
// benchmarks: the node's log handler into a batched discard, metrics and
// the usage recorder.
func wiredHandler(b *testing.B) *Handler {
	m := metrics.New(metrics.Options{NoRuntime: true})
	logOut := logbuf.New(io.Discard, logbuf.Options{})
	b.Cleanup(func() { logOut.Close() })
	h, _ := newHandler(b, Options{
		Logger:    slog.New(logline.NewHandler(logOut, nil)),
		Observer:  m,
		Recorders: []Recorder{m, usage.NewRecorder(&discardAppender{}, 0)},
		NodeID:    "bench-node",
	})
	return h
}

// recordAnswer sends body once through rt to the first target of model on
// path, and returns that target and the provider's answer, to be replayed.
func recordAnswer(b *testing.B, h *Handler, rt http.RoundTripper, path, model, body string) (*url.URL, http.Header, []byte) {
	mod, _ := h.o.Routes.Load().Model(model)
	spec, _ := catalog.ByPath(path)
	target, err := url.Parse(mod.Pools[spec.Endpoint][0].Backend.URL[spec.Endpoint])
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, target.String(), strings.NewReader(body))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	recorded, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return target, resp.Header, recorded
}
