package app

import (
	"encoding/json"
	"fmt"
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

// TestTraceResponseOutcome: the attempt span of every endpoint carries
// the provider's response model (gen_ai.response.model) and, where the
// answer has one, its finish reasons (gen_ai.response.finish_reasons),
// read from the JSON answer and from the stream alike.
func TestTraceResponseOutcome(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []string
		got    = make(chan struct{}, 64)
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

	chat := func(stream bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":"secret-body-canary"}]}`, openAIModel, stream)
	}
	resp := func(stream bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":%t,"input":"secret-body-canary"}`, openAIModel, stream)
	}
	msgs := func(stream bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":16,"messages":[{"role":"user","content":"secret-body-canary"}]}`, anthropicModel, stream)
	}
	cases := []struct {
		path, body     string
		header         map[string]string
		model, reasons string
	}{
		{"/v1/chat/completions", chat(false), bearer(clientKey), openAIProvModel, "stop"},
		{"/v1/chat/completions", chat(true), bearer(clientKey), openAIProvModel, "stop"},
		{"/v1/responses", resp(false), bearer(clientKey), openAIProvModel, "completed"},
		{"/v1/responses", resp(true), bearer(clientKey), openAIProvModel, "completed"},
		{"/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":"secret-body-canary"}`, openAIModel), bearer(clientKey), openAIProvModel, ""},
		{"/v1/messages", msgs(false), anthropicHeaders(clientKey), anthProvModel, "end_turn"},
		{"/v1/messages", msgs(true), anthropicHeaders(clientKey), anthProvModel, "end_turn"},
	}
	want := map[string]int{} // trace id -> case
	for i, c := range cases {
		tid := fmt.Sprintf("%032x", i+1)
		want[tid] = i
		c.header["Traceparent"] = "00-" + tid + "-00f067aa0ba902b7-01"
		if r := s.do(http.MethodPost, c.path, c.header, c.body); r.status != 200 {
			t.Fatalf("%s %s: status %d", c.path, c.body, r.status)
		}
		delete(c.header, "Traceparent")
	}

	type value struct {
		StringValue *string
		ArrayValue  *struct {
			Values []struct{ StringValue string }
		}
	}
	var doc struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct {
					TraceID    string
					Kind       int
					Attributes []struct {
						Key   string
						Value value
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for len(seen) < len(cases) {
		select {
		case <-got:
		case <-deadline.C:
			t.Fatalf("attempt spans of %d of %d requests exported", len(seen), len(cases))
		}
		mu.Lock()
		last := bodies[len(bodies)-1]
		mu.Unlock()
		if err := json.Unmarshal([]byte(last), &doc); err != nil {
			t.Fatal(err)
		}
		for _, rs := range doc.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					i, ok := want[sp.TraceID]
					if !ok || sp.Kind != 3 {
						continue
					}
					seen[sp.TraceID] = true
					c := cases[i]
					var model string
					var reasons []string
					for _, a := range sp.Attributes {
						switch a.Key {
						case "gen_ai.response.model":
							if a.Value.StringValue != nil {
								model = *a.Value.StringValue
							}
						case "gen_ai.response.finish_reasons":
							if a.Value.ArrayValue != nil {
								for _, v := range a.Value.ArrayValue.Values {
									reasons = append(reasons, v.StringValue)
								}
							}
						}
					}
					if model != c.model || strings.Join(reasons, ",") != c.reasons {
						t.Errorf("%s %s: response model %q, finish reasons %q; want %q, %q", c.path, c.body, model, reasons, c.model, c.reasons)
					}
				}
			}
		}
	}
	mu.Lock()
	all := strings.Join(bodies, "\n")
	mu.Unlock()
	for _, c := range []string{"secret-body-canary", "echo:"} {
		if strings.Contains(all, c) {
			t.Errorf("the export contains %q", c)
		}
	}
}

// TestTraceRouteNamesDoors: a request through a cloud platform's client
// path is named by its platform and endpoint, never "other" and never
// the client's own path (which holds the model).
func TestTraceRouteNamesDoors(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/chat/completions":                           "/v1/chat/completions",
		"/model/demo-claude/invoke":                      "bedrock /v1/messages",
		"/model/demo-claude/invoke-with-response-stream": "bedrock /v1/messages",
		"/model/demo-claude/count-tokens":                "bedrock /v1/messages/count_tokens",
		"/model/demo-nova/converse":                      "bedrock converse",
		"/v1/projects/p-1/locations/global/publishers/anthropic/models/demo-claude:rawPredict":           "vertex /v1/messages",
		"/v1/projects/p-1/locations/us-east5/publishers/google/models/demo-gemini:streamGenerateContent": "vertex stream_generate_content",
		"/openai/deployments/demo-gpt/chat/completions":                                                  "azure /v1/chat/completions",
		"/v1/models/demo-gpt":  "/v1/models/{id}",
		"/v1/nothing/demo-gpt": "other",
	} {
		if got := traceRoute(path, path); got != want {
			t.Errorf("traceRoute(%s) = %q, want %q", path, got, want)
		}
	}
}
