package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// otlpSpans is the part of an OTLP/HTTP JSON export the test reads.
type otlpSpans struct {
	ResourceSpans []struct {
		ScopeSpans []struct {
			Spans []struct {
				TraceID, SpanID, ParentSpanID, Name string
				Kind                                int
				Attributes                          []struct {
					Key   string
					Value map[string]any
				}
			}
		}
	}
}

// TestTraces: with [tracing] pointing at an in-process OTLP/HTTP
// receiver, a request that carries a traceparent yields a request span
// in the client's trace and an attempt span under it with the GenAI
// attributes; the traceparent is not forwarded to the provider, and no
// key or body content is in the export.
func TestTraces(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []string
		got    = make(chan struct{}, 16)
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		got <- struct{}{}
	}))
	defer rc.Close()
	s := startStack(t, stackOptions{extraTOML: "[tracing]\nendpoint = \"" + rc.URL + "/v1/traces\"\ninterval = \"100ms\"\n"})
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	body := `{"model":"demo-gpt","messages":[{"role":"user","content":"secret-body-canary"}]}`
	r := s.do(http.MethodPost, "/v1/chat/completions", map[string]string{
		"Authorization": "Bearer " + clientKey, "Traceparent": "00-" + tid + "-00f067aa0ba902b7-01",
	}, body)
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	spans := map[string]map[string]any{} // name -> attributes
	var reqSpan, attParent, attTrace string
	for len(spans) < 2 {
		select {
		case <-got:
		case <-deadline.C:
			t.Fatalf("spans never exported; got %v", spans)
		}
		mu.Lock()
		last := bodies[len(bodies)-1]
		mu.Unlock()
		var doc otlpSpans
		if err := json.Unmarshal([]byte(last), &doc); err != nil {
			t.Fatal(err)
		}
		for _, rs := range doc.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					attrs := map[string]any{}
					for _, a := range sp.Attributes {
						for _, v := range a.Value {
							attrs[a.Key] = v
						}
					}
					spans[sp.Name] = attrs
					switch sp.Kind {
					case 2:
						if sp.TraceID != tid || sp.ParentSpanID != "00f067aa0ba902b7" {
							t.Errorf("request span not in the client's trace: %+v", sp)
						}
						reqSpan = sp.SpanID
					case 3:
						attParent, attTrace = sp.ParentSpanID, sp.TraceID
					}
				}
			}
		}
	}
	if attTrace != tid || attParent != reqSpan {
		t.Errorf("attempt span trace %s parent %s, want %s under %s", attTrace, attParent, tid, reqSpan)
	}
	req, att := spans["POST /v1/chat/completions"], spans["chat "+openAIProvModel]
	if req == nil || att == nil {
		t.Fatalf("spans %v", spans)
	}
	for k, want := range map[string]any{"gen_ai.request.model": openAIModel, "gen_ai.operation.name": "chat", "http.response.status_code": "200"} {
		if req[k] != want {
			t.Errorf("request span %s = %v, want %v", k, req[k], want)
		}
	}
	for k, want := range map[string]any{
		"gen_ai.provider.name": "openai", "gen_ai.request.model": openAIProvModel, "scootgate.backend": "oa",
		"scootgate.send_state": "response_received",
	} {
		if att[k] != want {
			t.Errorf("attempt span %s = %v, want %v", k, att[k], want)
		}
	}
	if _, ok := att["gen_ai.usage.input_tokens"]; !ok {
		t.Error("attempt span without token usage")
	}
	mu.Lock()
	all := strings.Join(bodies, "\n")
	mu.Unlock()
	for _, c := range append(canaries, clientKey, "secret-body-canary", `"t-1"`, "k-full") {
		if strings.Contains(all, c) {
			t.Errorf("the export contains %q", c)
		}
	}
	// Counted once the collector's answer is in (the unit tests pin the
	// counts); here: the family is there with tracing on.
	if m := s.scrapeMetrics(); !strings.Contains(m, `scootgate_trace_spans_total{result="exported"} `) {
		t.Error("no scootgate_trace_spans_total with tracing on")
	}
	for _, pr := range s.prov.Requests() {
		if pr.Header.Get("Traceparent") != "" {
			t.Error("traceparent forwarded to the provider")
		}
	}
}
