package app

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func openAIClient(s *stack, key string) openai.Client {
	return openai.NewClient(
		ooption.WithBaseURL(s.api+"/v1/"),
		ooption.WithAPIKey(key),
		ooption.WithMaxRetries(0),
		ooption.WithRequestTimeout(20*time.Second),
	)
}

func anthropicClient(s *stack, key string) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithoutEnvironmentDefaults(),
		aoption.WithBaseURL(s.api),
		aoption.WithAPIKey(key),
		aoption.WithMaxRetries(0),
		aoption.WithRequestTimeout(20*time.Second),
	)
}

func openAIParams(prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    openAIModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	}
}

func anthropicParams(prompt string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropicModel,
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}
}

// TestOfficialSDKs drives the node with the official OpenAI and Anthropic
// SDKs, stream and non-stream, through each in-process egress proxy kind
// (SOCKS5, and HTTP CONNECT with Basic auth) to the fake provider.
func TestOfficialSDKs(t *testing.T) {
	for _, egress := range []stackOptions{{egress: "socks"}, {egress: "connect", proxyAuth: true}} {
		t.Run(egress.egress, func(t *testing.T) {
			s := startStack(t, egress)
			runSDKSuite(t, s)
			tunnels := int64(0)
			if s.socks != nil {
				tunnels = s.socks.Tunnels()
			} else {
				tunnels = s.connect.Tunnels()
			}
			if tunnels == 0 {
				t.Fatal("the proxy carried no tunnel: the node reached the provider some other way")
			}
		})
	}
}

// runSDKSuite is shared with the real-daemon tests.
func runSDKSuite(t *testing.T, s *stack) {
	ctx := t.Context()
	oc, ac := openAIClient(s, clientKey), anthropicClient(s, clientKey)

	t.Run("openai non-stream", func(t *testing.T) {
		res, err := oc.Chat.Completions.New(ctx, openAIParams("hello there"))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := res.Choices[0].Message.Content; got != "echo: hello there" {
			t.Errorf("content = %q, want %q", got, "echo: hello there")
		}
		if res.Usage.TotalTokens == 0 {
			t.Error("usage missing")
		}
		last := lastRequest(t, s)
		if last.Model != openAIProvModel {
			t.Errorf("provider saw model %q, want %q", last.Model, openAIProvModel)
		}
		if got := last.Header.Get("Authorization"); got != "Bearer "+openAIProvKey {
			t.Error("provider did not get the backend credential")
		}
	})
	t.Run("openai stream", func(t *testing.T) {
		st := oc.Chat.Completions.NewStreaming(ctx, openAIParams("hello stream [[chunks=4]]"))
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if got := acc.Choices[0].Message.Content; got != "echo: hello stream" {
			t.Errorf("content = %q, want %q", got, "echo: hello stream")
		}
		if !lastRequest(t, s).Stream {
			t.Error("provider did not see a stream request")
		}
	})
	t.Run("anthropic non-stream", func(t *testing.T) {
		msg, err := ac.Messages.New(ctx, anthropicParams("hello claude"))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := msg.Content[0].Text; got != "echo: hello claude" {
			t.Errorf("content = %q, want %q", got, "echo: hello claude")
		}
		if msg.Usage.OutputTokens == 0 {
			t.Error("usage missing")
		}
		last := lastRequest(t, s)
		if last.Model != anthProvModel {
			t.Errorf("provider saw model %q, want %q", last.Model, anthProvModel)
		}
		if got := last.Header.Get("X-Api-Key"); got != anthropProvKey {
			t.Error("provider did not get the backend credential")
		}
	})
	t.Run("anthropic stream", func(t *testing.T) {
		st := ac.Messages.NewStreaming(ctx, anthropicParams("hello stream [[chunks=5]]"))
		var msg anthropic.Message
		for st.Next() {
			if err := msg.Accumulate(st.Current()); err != nil {
				t.Fatalf("Accumulate: %v", err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if got := msg.Content[0].Text; got != "echo: hello stream" {
			t.Errorf("content = %q, want %q", got, "echo: hello stream")
		}
		if msg.StopReason != "end_turn" {
			t.Errorf("stop reason = %q, want end_turn", msg.StopReason)
		}
	})
	t.Run("models", func(t *testing.T) {
		page, err := oc.Models.List(ctx)
		if err != nil {
			t.Fatalf("openai list: %v", err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != openAIModel {
			t.Errorf("openai models = %+v, want [%s]", page.Data, openAIModel)
		}
		ap, err := ac.Models.List(ctx, anthropic.ModelListParams{})
		if err != nil {
			t.Fatalf("anthropic list: %v", err)
		}
		if len(ap.Data) != 1 || ap.Data[0].ID != anthropicModel {
			t.Errorf("anthropic models = %+v, want [%s]", ap.Data, anthropicModel)
		}
	})
	runAgentEndpoints(t, s, oc, ac)
	t.Run("sdk errors", func(t *testing.T) {
		bad := openAIClient(s, "sk-wrong")
		_, err := bad.Chat.Completions.New(ctx, openAIParams("x"))
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 401 {
			t.Errorf("openai bad key: %v, want *openai.Error 401", err)
		}
		p := anthropicParams("x")
		p.Model = "no-such-model"
		_, err = ac.Messages.New(ctx, p)
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 404 {
			t.Errorf("anthropic unknown model: %v, want *anthropic.Error 404", err)
		}
		// The Anthropic SDK reads RequestID from request-id: the node's id.
		if ae != nil && !strings.HasPrefix(ae.RequestID, "sg-") {
			t.Errorf("anthropic error RequestID = %q, want the node's sg- id", ae.RequestID)
		}
	})
}

// runAgentEndpoints drives the endpoints agent clients use (Responses,
// Embeddings, model retrieval, count_tokens) with the official SDKs.
func runAgentEndpoints(t *testing.T, s *stack, oc openai.Client, ac anthropic.Client) {
	ctx := t.Context()
	respParams := func(prompt string) responses.ResponseNewParams {
		return responses.ResponseNewParams{
			Model: openAIModel,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		}
	}
	t.Run("openai responses", func(t *testing.T) {
		res, err := oc.Responses.New(ctx, respParams("hello responses"))
		if err != nil {
			t.Fatalf("Responses.New: %v", err)
		}
		if got := res.OutputText(); got != "echo: hello responses" {
			t.Errorf("output text = %q", got)
		}
		if res.Usage.InputTokens != 2 || res.Usage.OutputTokens == 0 {
			t.Errorf("usage = %+v", res.Usage)
		}
		if last := lastRequest(t, s); last.Model != openAIProvModel || last.Path != "/v1/responses" {
			t.Errorf("provider saw %s model %q", last.Path, last.Model)
		}
	})
	t.Run("openai responses stream", func(t *testing.T) {
		st := oc.Responses.NewStreaming(ctx, respParams("hello stream [[chunks=3]]"))
		var text strings.Builder
		var last responses.ResponseStreamEventUnion
		for st.Next() {
			ev := st.Current()
			if ev.Type == "response.output_text.delta" {
				text.WriteString(ev.Delta)
			}
			last = ev
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if text.String() != "echo: hello stream" || last.Type != "response.completed" || last.Response.Usage.OutputTokens != 3 {
			t.Errorf("text %q, last event %q, usage %+v", text.String(), last.Type, last.Response.Usage)
		}
	})
	t.Run("openai responses stream cut", func(t *testing.T) {
		st := oc.Responses.NewStreaming(ctx, respParams("cut [[cut=after_events:3]]"))
		var types []string
		for st.Next() {
			types = append(types, st.Current().Type)
		}
		// The SDK parses the node's in-band error as the stream's error
		// event; it never sees a response.completed.
		if st.Err() != nil || len(types) != 4 || types[3] != "error" {
			t.Errorf("events %v, err %v; want 3 events and the error event", types, st.Err())
		}
	})
	t.Run("openai embeddings", func(t *testing.T) {
		res, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: openAIModel,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one two", "three"}},
		})
		if err != nil {
			t.Fatalf("Embeddings.New: %v", err)
		}
		if len(res.Data) != 2 || len(res.Data[0].Embedding) == 0 || res.Usage.PromptTokens != 3 {
			t.Errorf("embeddings = %d vectors, usage %+v", len(res.Data), res.Usage)
		}
	})
	t.Run("models get", func(t *testing.T) {
		m, err := oc.Models.Get(ctx, openAIModel)
		if err != nil || m.ID != openAIModel {
			t.Errorf("openai Models.Get = %+v, %v", m, err)
		}
		am, err := ac.Models.Get(ctx, anthropicModel, anthropic.ModelGetParams{})
		if err != nil || am.ID != anthropicModel {
			t.Errorf("anthropic Models.Get = %+v, %v", am, err)
		}
		_, err = oc.Models.Get(ctx, anthropicModel) // no OpenAI target
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 404 {
			t.Errorf("openai Models.Get of an anthropic-only model: %v, want 404", err)
		}
	})
	t.Run("anthropic count_tokens", func(t *testing.T) {
		res, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    anthropicModel,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three"))},
		})
		if err != nil {
			t.Fatalf("CountTokens: %v", err)
		}
		if res.InputTokens != 3 {
			t.Errorf("input tokens = %d, want 3", res.InputTokens)
		}
		if last := lastRequest(t, s); last.Model != anthProvModel || last.Path != "/v1/messages/count_tokens" {
			t.Errorf("provider saw %s model %q", last.Path, last.Model)
		}
	})
}

func lastRequest(t *testing.T, s *stack) fakeRequest {
	t.Helper()
	reqs := s.prov.Requests()
	if len(reqs) == 0 {
		t.Fatal("the provider received no request")
	}
	r := reqs[len(reqs)-1]
	return fakeRequest{Model: r.Model, Stream: r.Stream, Header: r.Header, Body: string(r.Body), Path: r.Path}
}

type fakeRequest struct {
	Path   string
	Model  string
	Stream bool
	Header http.Header
	Body   string
}

func bearer(key string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
}

func anthropicHeaders(key string) map[string]string {
	return map[string]string{"X-Api-Key": key, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json"}
}

// TestStatusContract checks docs/api.md "Status codes" in both error shapes,
// and that nothing reaches the provider for the locally rejected ones.
func TestStatusContract(t *testing.T) {
	// A fresh node per case: a provider 429 or 401 rightly changes the
	// backend's state (cooldown, disabled) for the cases after it.
	opts := stackOptions{bodyLimit: 4096, firstByte: "300ms"}
	big := `{"model":"demo-gpt","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	oa := func(prompt string) string {
		b, _ := json.Marshal(map[string]any{"model": openAIModel, "messages": []any{map[string]string{"role": "user", "content": prompt}}})
		return string(b)
	}
	an := func(prompt string) string {
		b, _ := json.Marshal(map[string]any{"model": anthropicModel, "max_tokens": 16, "messages": []any{map[string]string{"role": "user", "content": prompt}}})
		return string(b)
	}
	tests := []struct {
		name        string
		path        string
		header      map[string]string
		body        string
		status      int
		errType     string // OpenAI error.type or Anthropic error.type
		code        string // OpenAI code ("" = not checked)
		reachesProv bool
		shouldRetry string // "" = header absent
	}{
		{"openai missing key", "/v1/chat/completions", map[string]string{"Content-Type": "application/json"}, oa("x"), 401, "invalid_request_error", "invalid_api_key", false, ""},
		{"anthropic unknown key", "/v1/messages", anthropicHeaders("sk-nope"), an("x"), 401, "authentication_error", "", false, ""},
		{"anthropic bearer key accepted", "/v1/messages", map[string]string{"Authorization": "Bearer " + clientKey, "Anthropic-Version": "2026-10-21"}, an("ok"), 200, "", "", true, ""},
		{"openai not allowed", "/v1/chat/completions", bearer(limitedKey), oa("x"), 403, "invalid_request_error", "model_not_allowed", false, ""},
		{"anthropic not allowed", "/v1/messages", map[string]string{"X-Api-Key": limitedKey}, `{"model":"other","max_tokens":1,"messages":[]}`, 403, "permission_error", "", false, ""},
		{"openai unknown model", "/v1/chat/completions", bearer(clientKey), `{"model":"nope","messages":[]}`, 404, "invalid_request_error", "model_not_found", false, ""},
		{"anthropic unknown model", "/v1/messages", anthropicHeaders(clientKey), `{"model":"nope","max_tokens":1,"messages":[]}`, 404, "not_found_error", "", false, ""},
		{"openai malformed", "/v1/chat/completions", bearer(clientKey), `{"model":`, 400, "invalid_request_error", "invalid_json", false, ""},
		{"anthropic malformed", "/v1/messages", anthropicHeaders(clientKey), `[]`, 400, "invalid_request_error", "", false, ""},
		{"protocol mismatch", "/v1/chat/completions", bearer(clientKey), `{"model":"demo-claude","messages":[]}`, 400, "invalid_request_error", "protocol_mismatch", false, ""},
		{"capability not offered", "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[],"response_format":{"type":"json_schema"}}`, 400, "invalid_request_error", "capability_not_offered", false, ""},
		{"openai too large", "/v1/chat/completions", bearer(clientKey), big, 413, "invalid_request_error", "request_too_large", false, ""},
		{"anthropic too large", "/v1/messages", anthropicHeaders(clientKey), big, 413, "request_too_large", "", false, ""},
		{"provider 429 passed through", "/v1/chat/completions", bearer(clientKey), oa("x [[status=429]] [[retry_after=7]]"), 429, "", "", true, ""},
		{"provider 401 becomes 502", "/v1/messages", anthropicHeaders(clientKey), an("x [[status=401]]"), 502, "api_error", "", true, "true"},
		{"openai reset after body", "/v1/chat/completions", bearer(clientKey), oa("x [[reset=after_body]]"), 502, "server_error", "upstream_failed", true, "false"},
		{"anthropic reset after body", "/v1/messages", anthropicHeaders(clientKey), an("x [[reset=after_body]]"), 502, "api_error", "", true, "false"},
		{"first byte timeout", "/v1/chat/completions", bearer(clientKey), oa("x [[delay_ms=3000]]"), 504, "server_error", "upstream_timeout", true, "false"},
		{"anthropic first byte timeout", "/v1/messages", anthropicHeaders(clientKey), an("x [[hang]]"), 504, "api_error", "", true, "false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startStack(t, opts)
			before := s.prov.RequestCount()
			r := s.do(http.MethodPost, tt.path, tt.header, tt.body)
			if r.status != tt.status {
				t.Fatalf("status = %d, want %d; body %s", r.status, tt.status, r.body)
			}
			if !strings.HasPrefix(r.header.Get("X-Request-Id"), "sg-") {
				t.Errorf("X-Request-Id = %q, want our own sg- id", r.header.Get("X-Request-Id"))
			}
			if got := r.header.Get("X-Should-Retry"); got != tt.shouldRetry {
				t.Errorf("x-should-retry = %q, want %q", got, tt.shouldRetry)
			}
			sent := s.prov.RequestCount() - before
			if tt.reachesProv && sent != 1 {
				t.Errorf("provider received %d requests, want exactly 1", sent)
			}
			if !tt.reachesProv && sent != 0 {
				t.Errorf("provider received %d requests, want 0 (rejected before egress)", sent)
			}
			if tt.errType == "" {
				return
			}
			if strings.HasPrefix(tt.path, "/v1/messages") {
				var body struct {
					Type  string `json:"type"`
					Error struct{ Type, Message string }
				}
				if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Type != "error" || body.Error.Type != tt.errType || body.Error.Message == "" {
					t.Errorf("anthropic error body %s, want type error / %s", r.body, tt.errType)
				}
				return
			}
			var body struct {
				Error struct {
					Message, Type string
					Code          *string
				}
			}
			if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Error.Type != tt.errType || body.Error.Message == "" {
				t.Errorf("openai error body %s, want type %s", r.body, tt.errType)
			}
			if tt.code != "" && (body.Error.Code == nil || *body.Error.Code != tt.code) {
				t.Errorf("openai error code in %s, want %s", r.body, tt.code)
			}
		})
	}
	t.Run("429 keeps Retry-After and rate-limit headers", func(t *testing.T) {
		s := startStack(t, opts)
		r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), oa("x [[status=429]] [[retry_after=7]]"))
		if r.header.Get("Retry-After") != "7" {
			t.Errorf("Retry-After = %q, want 7", r.header.Get("Retry-After"))
		}
		if !strings.Contains(r.body, "rate_limit") {
			t.Errorf("429 body %s is not the provider's", r.body)
		}
	})
}

// TestHeaderAllowlists checks docs/api.md "Headers" both ways and the
// byte-faithful body.
func TestHeaderAllowlists(t *testing.T) {
	s := startStack(t, stackOptions{})
	body := "{\n  \"model\" : \"demo-claude\",\"max_tokens\":16, \"unknown_field\": {\"keep\": [1, 2.50, \"\\u00e9\"]},\n \"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
	r := s.do(http.MethodPost, "/v1/messages?beta=true", map[string]string{
		"X-Api-Key":         clientKey,
		"Authorization":     "Bearer " + clientKey,
		"Anthropic-Version": "2026-10-21",
		"Anthropic-Beta":    "tools-2024-05-16",
		"Cookie":            "session=abc",
		"X-Forwarded-For":   "10.0.0.1",
		"Idempotency-Key":   "idem-1",
		"Accept-Encoding":   "gzip",
		"User-Agent":        "claude-cli/9",
		"Content-Type":      "application/json",
	}, body)
	if r.status != 200 {
		t.Fatalf("status = %d, body %s", r.status, r.body)
	}
	got := lastRequest(t, s)
	want := strings.Replace(body, `"demo-claude"`, `"fake-claude-1"`, 1)
	if got.Body != want {
		t.Errorf("provider body:\n%s\nwant (only model rewritten):\n%s", got.Body, want)
	}
	for _, h := range []string{"Cookie", "X-Forwarded-For", "Idempotency-Key", "Authorization"} {
		if v := got.Header.Get(h); v != "" {
			t.Errorf("provider received client header %s", h)
		}
	}
	for h, want := range map[string]string{"Anthropic-Version": "2026-10-21", "Anthropic-Beta": "tools-2024-05-16", "User-Agent": "claude-cli/9", "X-Api-Key": anthropProvKey} {
		if v := got.Header.Get(h); v != want {
			t.Errorf("provider header %s = %q, want %q", h, v, want)
		}
	}
	if r.header.Get("Set-Cookie") != "" {
		t.Error("client received the provider's Set-Cookie")
	}
	if r.header.Get("X-Provider-Request-Id") == "" {
		t.Error("provider request id not passed to the client")
	}
	if r.header.Get("Anthropic-Ratelimit-Requests-Limit") == "" {
		t.Errorf("rate-limit headers not passed: %v", r.header)
	}
}

// TestStreamFailures: after the 200 is committed a failure ends the stream
// with an in-band error and never a fake terminator (docs/api.md "Streams").
func TestStreamFailures(t *testing.T) {
	s := startStack(t, stackOptions{idle: "300ms"})
	tests := []struct {
		name, path string
		header     map[string]string
		body       string
		wantEvent  string
	}{
		{"openai cut", "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"a b c [[cut=after_events:2]]"}]}`, `data: {"error":`},
		{"anthropic cut", "/v1/messages", anthropicHeaders(clientKey), `{"model":"demo-claude","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"a b c [[cut=after_events:2]]"}]}`, "event: error\ndata: {\"type\":\"error\""},
		{"openai idle", "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"a [[event_delay_ms=2000]]"}]}`, `data: {"error":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(http.MethodPost, tt.path, tt.header, tt.body)
			if r.status != 200 {
				t.Fatalf("status = %d, want the committed 200", r.status)
			}
			if !strings.HasSuffix(r.body, "\n\n") || !strings.Contains(r.body, tt.wantEvent) {
				t.Fatalf("stream does not end with an in-band error:\n%s", r.body)
			}
			if strings.Contains(r.body, "[DONE]") || strings.Contains(r.body, "message_stop") {
				t.Fatalf("stream carries a fake terminator:\n%s", r.body)
			}
		})
	}
	t.Run("sdk sees the error", func(t *testing.T) {
		oc := openAIClient(s, clientKey)
		st := oc.Chat.Completions.NewStreaming(t.Context(), openAIParams("a b [[cut=after_events:2]]"))
		for st.Next() {
		}
		if st.Err() == nil {
			t.Fatal("the SDK finished a cut stream without an error")
		}
	})
}

// TestCapacity503: a backend at its hard cap is not selected; with nothing
// else eligible the node answers 503 with Retry-After and x-should-retry.
func TestCapacity503(t *testing.T) {
	s := startStack(t, stackOptions{cap: 1})
	hung := make(chan response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+"/v1/chat/completions",
			strings.NewReader(`{"model":"demo-gpt","messages":[{"role":"user","content":"[[hang]]"}]}`))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			hung <- response{status: resp.StatusCode}
		}
		close(hung)
	}()
	s.waitForProviderRequests(t, 1)
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[]}`)
	if r.status != 503 || r.header.Get("Retry-After") == "" || r.header.Get("X-Should-Retry") != "true" {
		t.Fatalf("at cap: status %d Retry-After %q x-should-retry %q, want 503 with both", r.status, r.header.Get("Retry-After"), r.header.Get("X-Should-Retry"))
	}
	if n := s.prov.RequestCount(); n != 1 {
		t.Fatalf("provider saw %d requests, want only the hung one", n)
	}
	// The Anthropic backend has its own cap and still serves.
	if r := s.do(http.MethodPost, "/v1/messages", anthropicHeaders(clientKey), `{"model":"demo-claude","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`); r.status != 200 {
		t.Fatalf("other backend: status %d, want 200", r.status)
	}
}

// waitForProviderRequests blocks until the fake has seen n requests
// (bounded; yields instead of sleeping).
func (s *stack) waitForProviderRequests(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.prov.RequestCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("provider saw %d requests, want %d", s.prov.RequestCount(), n)
		}
		runtime.Gosched()
	}
}

// TestEgressFailClosed: with the proxy down nothing reaches the provider and
// the client gets a clean 502 that is safe to retry; proxy environment
// variables change nothing (docs/egress.md, docs/architecture.md "Go traps").
// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestEgressFailClosed(t *testing.T) {
	dead := deadAddr(t)
	s := startStack(t, stackOptions{proxyURL: "socks5://" + dead})
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`)
	if r.status != 502 || r.header.Get("X-Should-Retry") != "true" {
		t.Fatalf("proxy down: status %d x-should-retry %q, want 502 true; body %s", r.status, r.header.Get("X-Should-Retry"), r.body)
	}
	if n := s.prov.ConnCount(); n != 0 {
		t.Fatalf("provider accepted %d connections with the proxy down, want 0", n)
	}
}

func TestProxyEnvironmentIgnored(t *testing.T) {
	s0 := startStack(t, stackOptions{})
	// Point every proxy variable straight at the provider: if the transport
	// honoured them, the SOCKS proxy would carry nothing.
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, s0.provURL)
	}
	t.Setenv("NO_PROXY", "")
	s := startStack(t, stackOptions{})
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`); r.status != 200 {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	if s.socks.Tunnels() != 1 {
		t.Fatalf("SOCKS tunnels = %d, want 1", s.socks.Tunnels())
	}
	if s0.prov.RequestCount() != 0 {
		t.Fatal("a request went to the address in HTTP_PROXY")
	}
}

func TestSurface(t *testing.T) {
	s := startStack(t, stackOptions{})
	if r := s.do(http.MethodHead, "/", nil, ""); r.status != 200 {
		t.Errorf("HEAD / = %d, want 200", r.status)
	}
	// Claude Code's connection probe: 200, no body, no refusal line.
	if r := s.do(http.MethodHead, "/api/hello", nil, ""); r.status != 200 || r.body != "" {
		t.Errorf("HEAD /api/hello = %d %q, want 200 and no body", r.status, r.body)
	}
	if strings.Contains(s.logs.String(), "/api/hello") {
		t.Errorf("HEAD /api/hello was logged:\n%s", s.logs)
	}
	r := s.do(http.MethodGet, "/v1/models", map[string]string{"Authorization": "Bearer " + limitedKey}, "")
	if r.status != 200 || strings.Contains(r.body, openAIModel) {
		t.Errorf("openai models for a claude-only key: %d %s", r.status, r.body)
	}
	r = s.do(http.MethodGet, "/v1/models?limit=1000", map[string]string{"X-Api-Key": limitedKey, "Anthropic-Version": "2023-06-01"}, "")
	if r.status != 200 || !strings.Contains(r.body, `"id":"demo-claude"`) || !strings.Contains(r.body, `"has_more":false`) {
		t.Errorf("anthropic models: %d %s", r.status, r.body)
	}
	if r := s.do(http.MethodGet, "/v1/models", nil, ""); r.status != 401 {
		t.Errorf("models without key = %d, want 401", r.status)
	}
	if r := s.do(http.MethodGet, "/healthz", nil, ""); r.status != 404 {
		t.Errorf("/healthz on the API listener = %d, want 404", r.status)
	}
	resp, err := http.Get(s.health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/readyz = %d, want 200", resp.StatusCode)
	}
	resp, err = http.Get(s.health + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("/v1/models on the health listener = %d, want 404", resp.StatusCode)
	}
}

// TestClientDisconnectCancelsUpstream: the upstream request ends as soon as
// the client goes away (docs/api.md "Streams").
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	s := startStack(t, stackOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.api+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"a b c d [[chunks=50]] [[event_delay_ms=50]]"}]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	s.events.waitFor(t, "request chat_completions", 10*time.Second)
	s.logs.mustContain(t, `"stage":"client_cancelled"`)
}
