// Package tracing exports OpenTelemetry traces of the node's client
// requests and provider attempts over OTLP/HTTP, off by default.
//
// # Basics
//
// A [Tracer] is built from the [tracing] config section and run by the
// app. The app's middleware calls [Tracer.StartRequest] for each client
// request: it accepts a W3C traceparent from the client (the request span
// becomes its child) and otherwise starts a trace, sampled by
// Options.SampleRatio. The proxy hands every finished attempt's usage
// event to [Tracer.Attempt], which turns it into a child span of the
// request span carried in the request's context. Spans are queued
// (bounded, never blocking: a full queue drops and counts) and exported
// by [Tracer.Run] in batches, as OTLP/HTTP JSON, to Options.Endpoint.
//
// Spans carry the OpenTelemetry GenAI semantic-convention attributes the
// node knows (gen_ai.operation.name, gen_ai.provider.name, request and
// response models, token usage, finish reasons) and the node's own
// (backend, attempt, send state, failure stage, status). Never a key, a
// digest, a credential, a URL query, a tenant or key id, or any body
// content beyond the provider's response model and finish reasons, short
// strings bounded by internal/usage's Outcome. The node does not forward
// a traceparent (or any trace header) to providers.
//
// # Caveats
//
// A batch the collector refuses or does not answer
// is dropped (counted), not retried: tracing must not hold memory for an
// absent collector.
package tracing

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Span kinds (OTLP SpanKind).
const (
	kindServer = 2
	kindClient = 3
)

// Status codes (OTLP Status.code).
const (
	statusUnset = 0
	statusError = 2
)

// Defaults of Options.
const (
	DefaultBatchSize = 512
	DefaultQueueSize = 4096
	DefaultInterval  = 5 * time.Second
	DefaultTimeout   = 10 * time.Second
)

// Options configures New. Endpoint is required.
type Options struct {
	// Endpoint is the collector's OTLP/HTTP traces URL, such as
	// https://otel-collector:4318/v1/traces.
	Endpoint string
	// SampleRatio is the share of new traces recorded (0 to 1). A request
	// that carries a traceparent follows its sampled flag instead.
	SampleRatio float64
	// Resource attributes: service.name is "scootgate".
	ServiceVersion string
	NodeID         string

	BatchSize int           // spans per export; 0 = DefaultBatchSize
	QueueSize int           // spans waiting; beyond, new spans are dropped; 0 = DefaultQueueSize
	Interval  time.Duration // longest wait before a partial batch goes; 0 = DefaultInterval
	Timeout   time.Duration // one export request; 0 = DefaultTimeout

	Client *http.Client     // nil = a client with Timeout
	Logger *slog.Logger     // export failures, at most one line a minute
	Now    func() time.Time // nil = time.Now
	// Rand returns random 64-bit values for trace and span ids and
	// sampling; nil = math/rand/v2 (ChaCha8, seeded by the runtime).
	Rand func() uint64
}

// Stats counts spans by what became of them.
type Stats struct {
	Exported uint64 // accepted by the collector
	Dropped  uint64 // refused by a full queue
	Failed   uint64 // in batches the collector refused or did not answer
}

// Tracer records spans and exports them. Safe for concurrent use.
type Tracer struct {
	// immutable
	o        Options
	resource []attr
	queue    chan *span

	exported, dropped, failed atomic.Uint64
	lastLog                   atomic.Int64 // unix seconds of the last failure line
}

// New returns a Tracer; call Run to export.
func New(o Options) *Tracer {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Uint64
	}
	res := []attr{str("service.name", "scootgate")}
	if o.ServiceVersion != "" {
		res = append(res, str("service.version", o.ServiceVersion))
	}
	if o.NodeID != "" {
		res = append(res, str("service.instance.id", o.NodeID))
	}
	return &Tracer{o: o, resource: res, queue: make(chan *span, o.QueueSize)}
}

// Stats returns the span counters.
func (t *Tracer) Stats() Stats {
	return Stats{Exported: t.exported.Load(), Dropped: t.dropped.Load(), Failed: t.failed.Load()}
}

// TraceID and SpanID are W3C trace context ids.
type (
	TraceID [16]byte
	SpanID  [8]byte
)

// SpanContext identifies a span of a trace.
type SpanContext struct {
	TraceID TraceID
	SpanID  SpanID
	Sampled bool
}

// ParseTraceparent reads a W3C traceparent header value
// (version-traceid-parentid-flags). It accepts version 00 exactly and a
// later version by its first four fields; an all-zero id or a malformed
// value is not a parent.
func ParseTraceparent(s string) (SpanContext, bool) {
	var sc SpanContext
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return sc, false
	}
	ver := s[:2]
	if ver == "ff" || !isLowerHex(ver) || (ver == "00" && len(s) != 55) || (ver != "00" && len(s) > 55 && s[55] != '-') {
		return sc, false
	}
	if !isLowerHex(s[3:35]) || !isLowerHex(s[36:52]) || !isLowerHex(s[53:55]) {
		return sc, false
	}
	_, _ = hex.Decode(sc.TraceID[:], []byte(s[3:35]))
	_, _ = hex.Decode(sc.SpanID[:], []byte(s[36:52]))
	if sc.TraceID == (TraceID{}) || sc.SpanID == (SpanID{}) {
		return SpanContext{}, false
	}
	flags, _ := strconv.ParseUint(s[53:55], 16, 8)
	sc.Sampled = flags&1 == 1
	return sc, true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// attr is one span attribute: a string or an int.
type attr struct {
	key   string
	s     string
	i     int64
	isInt bool
	list  []string // a string array when non-nil
}

func str(k, v string) attr       { return attr{key: k, s: v} }
func num(k string, v int64) attr { return attr{key: k, i: v, isInt: true} }

// strs is a string-array attribute; it keeps vs.
func strs(k string, vs []string) attr { return attr{key: k, list: vs} }

// span is a finished or running span.
type span struct {
	name          string
	kind          int
	trace         TraceID
	id, parent    SpanID
	start, end    time.Time
	attrs         []attr
	status        int
	statusMessage string
}

func (t *Tracer) newSpanID() (id SpanID) {
	for id == (SpanID{}) {
		v := t.o.Rand()
		for i := range id {
			id[i] = byte(v >> (8 * i))
		}
	}
	return id
}

func (t *Tracer) newTraceID() (id TraceID) {
	for id == (TraceID{}) {
		a, b := t.o.Rand(), t.o.Rand()
		for i := range 8 {
			id[i], id[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
		}
	}
	return id
}

// enqueue hands a finished span to the exporter without blocking.
func (t *Tracer) enqueue(s *span) {
	select {
	case t.queue <- s:
	default:
		t.dropped.Add(1)
	}
}

// shutdownBudget is how long exports may still run once Run's context
// has ended: the export under way and the spans still queued share it.
const shutdownBudget = 2 * time.Second

// Run exports queued spans in batches until ctx ends, then exports what
// is queued and returns, at most shutdownBudget after ctx ended.
func (t *Tracer) Run(ctx context.Context) {
	tick := time.NewTicker(t.o.Interval)
	defer tick.Stop()
	// Exports are not cut by ctx itself (a batch under way when the node
	// stops still goes out), only shutdownBudget after it.
	exportCtx, cancelExport := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExport() // also ends the budget goroutine below
	stopAfter := context.AfterFunc(ctx, func() {
		budget := time.NewTimer(shutdownBudget)
		defer budget.Stop()
		select {
		case <-budget.C:
			cancelExport()
		case <-exportCtx.Done(): // Run returned first
		}
	})
	defer stopAfter()
	batch := make([]*span, 0, t.o.BatchSize)
	flush := func() {
		if len(batch) > 0 {
			t.export(exportCtx, batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case s := <-t.queue:
			batch = append(batch, s)
			if len(batch) == t.o.BatchSize {
				flush()
			}
		case <-tick.C:
			flush()
		case <-ctx.Done():
			for {
				select {
				case s := <-t.queue:
					batch = append(batch, s)
					if len(batch) == t.o.BatchSize {
						flush()
					}
				default:
					flush()
					return
				}
			}
		}
	}
}

// export sends one batch; a failure drops it and is counted and logged
// at most once a minute.
func (t *Tracer) export(ctx context.Context, batch []*span) {
	body, err := json.Marshal(t.document(batch))
	if err == nil {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, t.o.Endpoint, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			var resp *http.Response
			if resp, err = t.o.Client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					err = fmt.Errorf("collector answered %d", resp.StatusCode)
				}
			}
		}
	}
	if err == nil {
		t.exported.Add(uint64(len(batch)))
		return
	}
	t.failed.Add(uint64(len(batch)))
	now := t.o.Now().Unix()
	if last := t.lastLog.Load(); now-last >= 60 && t.lastLog.CompareAndSwap(last, now) {
		t.o.Logger.Warn("trace export failed; spans dropped", "spans", len(batch), "error", errorText(err))
	}
}

// errorText is an error without the URL that *url.Error embeds, as in
// every other log line of the node.
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// The OTLP/HTTP JSON document (opentelemetry-proto, JSON encoding: ids
// in hex, 64-bit integers as strings).
type (
	otlpDoc struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
	}
	otlpResource struct {
		Attributes []otlpKV `json:"attributes"`
	}
	otlpScopeSpans struct {
		Scope otlpScope  `json:"scope"`
		Spans []otlpSpan `json:"spans"`
	}
	otlpScope struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	otlpSpan struct {
		TraceID           string      `json:"traceId"`
		SpanID            string      `json:"spanId"`
		ParentSpanID      string      `json:"parentSpanId,omitempty"`
		Name              string      `json:"name"`
		Kind              int         `json:"kind"`
		StartTimeUnixNano string      `json:"startTimeUnixNano"`
		EndTimeUnixNano   string      `json:"endTimeUnixNano"`
		Attributes        []otlpKV    `json:"attributes,omitempty"`
		Status            *otlpStatus `json:"status,omitempty"`
	}
	otlpKV struct {
		Key   string    `json:"key"`
		Value otlpValue `json:"value"`
	}
	otlpValue struct {
		StringValue *string    `json:"stringValue,omitempty"`
		IntValue    *string    `json:"intValue,omitempty"`
		ArrayValue  *otlpArray `json:"arrayValue,omitempty"`
	}
	otlpArray struct {
		Values []otlpValue `json:"values"`
	}
	otlpStatus struct {
		Code    int    `json:"code"`
		Message string `json:"message,omitempty"`
	}
)

func kvs(as []attr) []otlpKV {
	out := make([]otlpKV, len(as))
	for i, a := range as {
		out[i].Key = a.key
		switch {
		case a.isInt:
			v := strconv.FormatInt(a.i, 10)
			out[i].Value.IntValue = &v
		case a.list != nil:
			arr := &otlpArray{Values: make([]otlpValue, len(a.list))}
			for j := range a.list {
				arr.Values[j].StringValue = &a.list[j]
			}
			out[i].Value.ArrayValue = arr
		default:
			v := a.s
			out[i].Value.StringValue = &v
		}
	}
	return out
}

func (t *Tracer) document(batch []*span) otlpDoc {
	spans := make([]otlpSpan, len(batch))
	for i, s := range batch {
		o := otlpSpan{
			TraceID: hex.EncodeToString(s.trace[:]), SpanID: hex.EncodeToString(s.id[:]),
			Name: s.name, Kind: s.kind,
			StartTimeUnixNano: strconv.FormatInt(s.start.UnixNano(), 10),
			EndTimeUnixNano:   strconv.FormatInt(s.end.UnixNano(), 10),
			Attributes:        kvs(s.attrs),
		}
		if s.parent != (SpanID{}) {
			o.ParentSpanID = hex.EncodeToString(s.parent[:])
		}
		if s.status != statusUnset {
			o.Status = &otlpStatus{Code: s.status, Message: s.statusMessage}
		}
		spans[i] = o
	}
	return otlpDoc{ResourceSpans: []otlpResourceSpans{{
		Resource:   otlpResource{Attributes: kvs(t.resource)},
		ScopeSpans: []otlpScopeSpans{{Scope: otlpScope{Name: "scootgate", Version: t.o.ServiceVersion}, Spans: spans}},
	}}}
}

// Request is the span of one client request; nil when the request is
// not sampled (every method of a nil *Request does nothing).
type Request struct {
	t  *Tracer
	mu sync.Mutex
	s  span // guarded by mu
}

type ctxKey struct{}

// StartRequest starts the span of a client request, as a child of the
// client's traceparent when it sends a valid one (and follows its
// sampled flag), else in a new trace sampled by Options.SampleRatio. It
// returns nil and r's context when the request is not sampled. The span
// is named and described by route (a fixed client path or "other"; never
// the client's own path, which could hold anything).
func (t *Tracer) StartRequest(r *http.Request, route string) (*Request, context.Context) {
	ctx := r.Context()
	parent, ok := ParseTraceparent(r.Header.Get("Traceparent"))
	if ok && !parent.Sampled || !ok && !t.sample() {
		return nil, ctx
	}
	q := &Request{t: t, s: span{
		name: r.Method + " " + route, kind: kindServer, id: t.newSpanID(), start: t.o.Now(),
		attrs: []attr{str("http.request.method", r.Method), str("http.route", route)},
	}}
	if ok {
		q.s.trace, q.s.parent = parent.TraceID, parent.SpanID
	} else {
		q.s.trace = t.newTraceID()
	}
	return q, context.WithValue(ctx, ctxKey{}, q)
}

func (t *Tracer) sample() bool {
	switch r := t.o.SampleRatio; {
	case r >= 1:
		return true
	case r <= 0:
		return false
	default:
		return float64(t.o.Rand()>>11)/(1<<53) < r
	}
}

// Traceparent returns the W3C traceparent of the request span (for the
// response header, so a client can find its trace).
func (q *Request) Traceparent() string {
	if q == nil {
		return ""
	}
	return "00-" + hex.EncodeToString(q.s.trace[:]) + "-" + hex.EncodeToString(q.s.id[:]) + "-01"
}

// End finishes the request span with the status sent to the client and
// the node's request id, and queues it.
func (q *Request) End(status int, requestID string) {
	if q == nil {
		return
	}
	q.mu.Lock()
	s := q.s
	s.attrs = append(s.attrs[:len(s.attrs):len(s.attrs)], num("http.response.status_code", int64(status)))
	if requestID != "" {
		s.attrs = append(s.attrs, str("scootgate.request_id", requestID))
	}
	q.mu.Unlock()
	s.end = q.t.o.Now()
	if status >= 500 {
		s.status = statusError
	}
	q.t.enqueue(&s)
}

// FromContext returns the request span ctx carries, or nil.
func FromContext(ctx context.Context) *Request {
	q, _ := ctx.Value(ctxKey{}).(*Request)
	return q
}
