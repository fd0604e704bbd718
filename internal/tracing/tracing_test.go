package tracing

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// receiver is an in-process OTLP/HTTP collector: it decodes every
// export and keeps the raw bodies.
type receiver struct {
	srv    *httptest.Server
	status int

	mu     sync.Mutex
	bodies []string
	docs   []otlpDoc
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{status: 200}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("export %s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		var d otlpDoc
		if err := json.Unmarshal(body, &d); err != nil {
			t.Errorf("export is not OTLP JSON: %v", err)
		}
		rc.mu.Lock()
		rc.bodies, rc.docs = append(rc.bodies, string(body)), append(rc.docs, d)
		status := rc.status
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) spans() []otlpSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []otlpSpan
	for _, d := range rc.docs {
		for _, rs := range d.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

// counter is a deterministic Rand.
func counter() func() uint64 {
	var n uint64
	return func() uint64 { n += 0x0101010101010101; return n }
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func newTracer(t *testing.T, rc *receiver, o Options) *Tracer {
	t.Helper()
	o.Endpoint = rc.srv.URL + "/v1/traces"
	if o.SampleRatio == 0 {
		o.SampleRatio = 1
	}
	o.Interval = time.Hour // batches go by size or at the end only
	o.Rand = counter()
	o.Now = func() time.Time { return t0 }
	o.NodeID, o.ServiceVersion = "node-1", "1.2.3"
	return New(o)
}

// runUntilDone runs the exporter and returns a func that stops it and
// waits for its final export.
func runUntilDone(t *testing.T, tr *Tracer) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		tr.Run(ctx)
		close(done)
	}()
	return func() {
		cancel()
		<-done
	}
}

func TestParseTraceparent(t *testing.T) {
	tid := "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{"00-" + tid + "-00f067aa0ba902b7-01", true, true},
		{"00-" + tid + "-00f067aa0ba902b7-00", true, false},
		{"01-" + tid + "-00f067aa0ba902b7-01-later-fields", true, true},
		{"00-" + tid + "-00f067aa0ba902b7-01-extra", false, false}, // version 00 is exactly 55 bytes
		{"ff-" + tid + "-00f067aa0ba902b7-01", false, false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false},
		{"00-" + tid + "-0000000000000000-01", false, false},
		{"00-" + strings.ToUpper(tid) + "-00f067aa0ba902b7-01", false, false},
		{"00-" + tid + "-00f067aa0ba902b7", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		sc, ok := ParseTraceparent(tt.in)
		if ok != tt.ok || sc.Sampled != tt.sampled {
			t.Errorf("ParseTraceparent(%q) = %+v, %v; want ok %v sampled %v", tt.in, sc, ok, tt.ok, tt.sampled)
		}
	}
}

func attrMap(kvs []otlpKV) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch {
		case kv.Value.StringValue != nil:
			m[kv.Key] = *kv.Value.StringValue
		case kv.Value.IntValue != nil:
			m[kv.Key] = "int:" + *kv.Value.IntValue
		case kv.Value.ArrayValue != nil:
			var vs []string
			for _, v := range kv.Value.ArrayValue.Values {
				vs = append(vs, *v.StringValue)
			}
			m[kv.Key] = "list:" + strings.Join(vs, ",")
		}
	}
	return m
}

// TestRequestAndAttemptSpans: a client's traceparent makes the request
// span its child; each attempt is a client span under the request span
// with the GenAI attributes; the export carries no tenant, key, body or
// provider usage JSON.
func TestRequestAndAttemptSpans(t *testing.T) {
	rc := newReceiver(t)
	tr := newTracer(t, rc, Options{})
	stop := runUntilDone(t, tr)

	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	q, ctx := tr.StartRequest(r, "/v1/chat/completions")
	if q == nil {
		t.Fatal("sampled traceparent not traced")
	}
	ev := &usageevent.Event{
		RequestID: "sg-1", TenantID: "tenant-canary", KeyID: "key-canary", PublicModel: "gpt-4o",
		ProviderModel: "gpt-4o-2024-08-06", Backend: "openai-a", Protocol: "openai", Endpoint: "chat_completions",
		Attempt: 1, SendState: "response_received", HTTPStatus: 200, TTFBMs: 420, DurationMs: 1500,
		StartedAt:     t0.Add(time.Millisecond),
		Usage:         &usageevent.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 1000},
		ProviderUsage: json.RawMessage(`{"prompt_tokens":1200,"secret-body":"canary"}`),
	}
	tr.Attempt(ctx, ev, provider.Outcome{Model: "gpt-4o-2024-08-06-answered", FinishReasons: []string{"stop", "length"}})
	q.End(200, "sg-1")
	stop()

	spans := rc.spans()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported, want 2 (attempt, request)", len(spans))
	}
	att, req := spans[0], spans[1]
	if req.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || req.ParentSpanID != "00f067aa0ba902b7" || req.Kind != kindServer {
		t.Errorf("request span %+v: want the client's trace, its span as parent, kind server", req)
	}
	if att.TraceID != req.TraceID || att.ParentSpanID != req.SpanID || att.Kind != kindClient {
		t.Errorf("attempt span %+v: want a client child of the request span", att)
	}
	wantStart, wantEnd := strconv.FormatInt(t0.Add(time.Millisecond).UnixNano(), 10), strconv.FormatInt(t0.Add(1501*time.Millisecond).UnixNano(), 10)
	if att.StartTimeUnixNano != wantStart || att.EndTimeUnixNano != wantEnd {
		t.Errorf("attempt times %s..%s: want the event's start and duration", att.StartTimeUnixNano, att.EndTimeUnixNano)
	}
	if diff := cmp.Diff(attrMap(att.Attributes), map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
		"gen_ai.request.model": "gpt-4o-2024-08-06", "scootgate.public_model": "gpt-4o",
		"scootgate.backend": "openai-a", "scootgate.attempt": "int:1", "scootgate.send_state": "response_received",
		"http.response.status_code": "int:200", "scootgate.ttfb_ms": "int:420",
		"gen_ai.usage.input_tokens": "int:1200", "gen_ai.usage.output_tokens": "int:300",
		"gen_ai.usage.cache_read.input_tokens": "int:1000",
		"gen_ai.response.model":                "gpt-4o-2024-08-06-answered", "gen_ai.response.finish_reasons": "list:stop,length",
	}); diff != "" {
		t.Errorf("attempt attributes (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(attrMap(req.Attributes), map[string]string{
		"http.request.method": "POST", "http.route": "/v1/chat/completions", "gen_ai.operation.name": "chat",
		"gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai", "scootgate.attempts": "int:1",
		"http.response.status_code": "int:200", "scootgate.request_id": "sg-1",
		"gen_ai.response.model": "gpt-4o-2024-08-06-answered",
	}); diff != "" {
		t.Errorf("request attributes (-got +want):\n%s", diff)
	}
	if att.Name != "chat gpt-4o-2024-08-06" || req.Name != "POST /v1/chat/completions" {
		t.Errorf("names %q, %q", att.Name, req.Name)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if diff := cmp.Diff(attrMap(rc.docs[0].ResourceSpans[0].Resource.Attributes), map[string]string{
		"service.name": "scootgate", "service.version": "1.2.3", "service.instance.id": "node-1",
	}); diff != "" {
		t.Errorf("resource (-got +want):\n%s", diff)
	}
	for _, c := range []string{"canary", "tenant", "key-"} {
		if strings.Contains(rc.bodies[0], c) {
			t.Errorf("export contains %q:\n%s", c, rc.bodies[0])
		}
	}
	if st := tr.Stats(); st != (Stats{Exported: 2}) {
		t.Errorf("stats %+v", st)
	}
}

// TestSampling: a traceparent's sampled flag decides; without one the
// ratio does.
func TestSampling(t *testing.T) {
	rc := newReceiver(t)
	for _, tt := range []struct {
		name        string
		ratio       float64
		traceparent string
		want        bool
	}{
		{"ratio 1", 1, "", true},
		{"ratio 0", -1, "", false},
		{"parent not sampled", 1, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", false},
		{"parent sampled, ratio 0", -1, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"malformed parent: a new trace", 1, "00-xyz", true},
	} {
		tr := newTracer(t, rc, Options{SampleRatio: tt.ratio})
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
		if tt.traceparent != "" {
			r.Header.Set("Traceparent", tt.traceparent)
		}
		q, ctx := tr.StartRequest(r, "/v1/messages")
		if (q != nil) != tt.want || (FromContext(ctx) != nil) != tt.want {
			t.Errorf("%s: traced %v, want %v", tt.name, q != nil, tt.want)
		}
		tr.Attempt(ctx, &usageevent.Event{}, provider.Outcome{}) // untraced: nothing
		q.End(200, "")                                           // nil-safe
	}
	// The ratio is applied to a uniform draw.
	n := 0
	tr := New(Options{Endpoint: rc.srv.URL, SampleRatio: 0.25})
	for range 10000 {
		if tr.sample() {
			n++
		}
	}
	if n < 2200 || n > 2800 {
		t.Errorf("ratio 0.25 sampled %d of 10000", n)
	}
}

// TestBatchesAndQueue: spans go in batches of BatchSize, the rest at the
// end; a full queue drops and counts instead of blocking.
func TestBatchesAndQueue(t *testing.T) {
	rc := newReceiver(t)
	tr := newTracer(t, rc, Options{BatchSize: 3, QueueSize: 7})
	r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	for range 9 {
		q, _ := tr.StartRequest(r, "/v1/models")
		q.End(200, "")
	}
	if st := tr.Stats(); st.Dropped != 2 {
		t.Fatalf("dropped %d of 9 with a queue of 7, want 2", st.Dropped)
	}
	runUntilDone(t, tr)()
	rc.mu.Lock()
	var sizes []int
	for _, d := range rc.docs {
		sizes = append(sizes, len(d.ResourceSpans[0].ScopeSpans[0].Spans))
	}
	rc.mu.Unlock()
	if diff := cmp.Diff(sizes, []int{3, 3, 1}); diff != "" {
		t.Errorf("batch sizes (-got +want):\n%s", diff)
	}
	if st := tr.Stats(); st != (Stats{Exported: 7, Dropped: 2}) {
		t.Errorf("stats %+v", st)
	}
}

// TestExportFailure: a batch the collector refuses is dropped and
// counted, and said once in the log.
func TestExportFailure(t *testing.T) {
	rc := newReceiver(t)
	rc.status = http.StatusServiceUnavailable
	var log strings.Builder
	tr := newTracer(t, rc, Options{BatchSize: 1})
	tr.o.Logger = newTextLogger(&log)
	r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	for range 3 {
		q, _ := tr.StartRequest(r, "/v1/models")
		q.End(200, "")
	}
	runUntilDone(t, tr)()
	if st := tr.Stats(); st != (Stats{Failed: 3}) {
		t.Errorf("stats %+v", st)
	}
	if n := strings.Count(log.String(), "trace export failed"); n != 1 {
		t.Errorf("%d failure lines for 3 failed exports in one minute, want 1:\n%s", n, log.String())
	}
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// BenchmarkRequestWithAttempt is the tracing work one sampled request
// adds on the request path: start the request span, one attempt span
// from its usage event, end (the export runs elsewhere; the queue is
// drained here so that it never fills).
func BenchmarkRequestWithAttempt(b *testing.B) {
	tr := New(Options{Endpoint: "http://127.0.0.1:1/v1/traces", SampleRatio: 1, QueueSize: 1 << 20})
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ev := &usageevent.Event{PublicModel: "gpt-4o", ProviderModel: "gpt-4o-2024-08-06", Backend: "openai-a",
		Protocol: "openai", Endpoint: "chat_completions", Attempt: 1, SendState: "response_received",
		HTTPStatus: 200, TTFBMs: 400, DurationMs: 1500, StartedAt: t0,
		Usage: &usageevent.Usage{InputTokens: 1200, OutputTokens: 300}}
	b.ReportAllocs()
	for b.Loop() {
		q, ctx := tr.StartRequest(r, "/v1/chat/completions")
		tr.Attempt(ctx, ev, provider.Outcome{})
		q.End(200, "sg-1")
		<-tr.queue
		<-tr.queue
	}
}

// TestShutdownBounded: with a collector that never answers, Run returns
// within the shutdown budget after its context ends, the batch under way
// and the queued spans counted as failed.
func TestShutdownBounded(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	tr := New(Options{Endpoint: srv.URL, SampleRatio: 1, BatchSize: 2, Interval: time.Hour, Timeout: time.Hour})
	r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	for range 5 {
		q, _ := tr.StartRequest(r, "/v1/models")
		q.End(200, "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	cancel()
	start := time.Now()
	select {
	case <-done:
	case <-time.After(shutdownBudget + 5*time.Second):
		t.Fatal("Run did not return after the shutdown budget")
	}
	if el := time.Since(start); el > shutdownBudget+time.Second {
		t.Errorf("Run returned %v after its context ended, want about %v", el, shutdownBudget)
	}
	if st := tr.Stats(); st.Failed != 5 {
		t.Errorf("stats %+v, want the 5 spans failed", st)
	}
}

// TestOperation: each endpoint's gen_ai.operation.name.
func TestOperation(t *testing.T) {
	got := map[string]string{}
	for _, e := range []string{
		usageevent.EndpointChatCompletions, usageevent.EndpointResponses, usageevent.EndpointEmbeddings,
		usageevent.EndpointCountTokens, usageevent.EndpointResponsesCompact, usageevent.EndpointResponsesInputTokens,
	} {
		got[e] = operation(e)
	}
	want := map[string]string{
		"chat_completions": "chat", "responses": "chat", "embeddings": "embeddings",
		"count_tokens": "count_tokens", "responses_compact": "compact", "responses_input_tokens": "count_tokens",
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("operation (-got +want):\n%s", diff)
	}
}
