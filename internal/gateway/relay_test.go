package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/internal/routes"
)

// TestResponseHeaders: a client sees the content type, Retry-After, the
// retry advice and rate-limit state its API lists, and the provider's
// request id as X-Provider-Request-Id (x-request-id winning over
// request-id, whatever the map order); never cookies, never anything
// else.
func TestResponseHeaders(t *testing.T) {
	src := http.Header{
		"Content-Type": {"application/json"}, "Retry-After": {"2"}, "Retry-After-Ms": {"1500"},
		"X-Ratelimit-Remaining-Requests": {"9"}, "Anthropic-Ratelimit-Requests-Remaining": {"8"},
		"X-Request-Id": {"req_openai"}, "Request-Id": {"req_anthropic"},
		"Set-Cookie": {"s=1"}, "Server": {"x"}, "Content-Encoding": {"gzip"},
	}
	only := http.Header{"Request-Id": {"req_anthropic"}}
	for _, api := range []*provider.API{openai.API, anthropic.API} {
		dst := http.Header{}
		copyResponseHeaders(dst, only, api)
		if got := dst.Get("X-Provider-Request-Id"); got != "req_anthropic" {
			t.Errorf("%v: request-id alone: X-Provider-Request-Id = %q", api.Protocol, got)
		}
	}
	for _, tc := range []struct {
		api  *provider.API
		want http.Header
	}{
		{openai.API, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"2"}, "Retry-After-Ms": {"1500"},
			"X-Ratelimit-Remaining-Requests": {"9"}, "Anthropic-Ratelimit-Requests-Remaining": {"8"}, "X-Provider-Request-Id": {"req_openai"}}},
		{anthropic.API, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"2"}, "Retry-After-Ms": {"1500"},
			"X-Ratelimit-Remaining-Requests": {"9"}, "Anthropic-Ratelimit-Requests-Remaining": {"8"}, "X-Provider-Request-Id": {"req_openai"}}},
	} {
		for range 20 { // map order changes between iterations
			dst := http.Header{}
			copyResponseHeaders(dst, src, tc.api)
			if diff := cmp.Diff(dst, tc.want); diff != "" {
				t.Fatalf("%v (-got +want):\n%s", tc.api.Protocol, diff)
			}
		}
	}
}

// TestUnknownContentEncodingRefused: an encoding other than gzip is never
// relayed as if it were JSON.
func TestUnknownContentEncodingRefused(t *testing.T) {
	for _, ce := range []string{"br", "zstd", "deflate", "gzip, br"} {
		resp := &http.Response{Header: http.Header{"Content-Encoding": {ce}}}
		if _, err := decodedBody(resp, strings.NewReader("x")); !errors.Is(err, errUnknownEncoding) {
			t.Errorf("%s: err = %v, want errUnknownEncoding", ce, err)
		}
	}
	resp := &http.Response{Header: http.Header{"Content-Encoding": {"identity"}}}
	if _, err := decodedBody(resp, strings.NewReader("x")); err != nil {
		t.Errorf("identity: %v", err)
	}
}

// TestGeminiBadKeyIsTheGatewaysProblem: Google answers a refused API key
// with a 400 (reason API_KEY_INVALID), not a 401. The client's request was
// fine: it gets a 502 upstream_auth_failed, never the provider's 400, and
// the backend is disabled as for a 401. A 400 about the request itself
// passes through and disables nothing.
func TestGeminiBadKeyIsTheGatewaysProblem(t *testing.T) {
	badKey := `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	badRequest := `{"error":{"code":400,"message":"API_KEY_INVALID is not a valid role","status":"INVALID_ARGUMENT"}}`
	for _, tc := range []struct {
		name, body string
		status     int
		disabled   bool
	}{
		{"refused key", badKey, 502, true},
		{"a bad request that quotes the words", badRequest, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer prov.Close()
			h := newHandlerAt(t, Options{}, prov.URL+"/v1")
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/v1beta/models/gemini:generateContent", "application/json",
				strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, data)
			}
			passed := string(data) == tc.body // the provider's answer, as received
			if passed == tc.disabled {
				t.Errorf("body %s (passed through: %v)", data, passed)
			}
			m, _ := h.o.Routes.Load().Model("gemini")
			disabled := m.Pools[provider.GenerateContent][0].Backend.State.Disabled()
			if disabled != tc.disabled {
				t.Errorf("backend disabled %v, want %v", disabled, tc.disabled)
			}
		})
	}
}

// TestRefusalsAboutOneRequest: a provider answer about the one request —
// OpenAI's 429 for a request too large for the per-minute limit, its 403
// for a model the project may not use — rests the backend for no one; the
// same statuses about the backend (a rate limit reached, a refused
// credential, Anthropic's permission_error) still cool or disable it. The
// bodies are the providers' own.
func TestRefusalsAboutOneRequest(t *testing.T) {
	const (
		tooLarge = `{"error":{"message":"Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 48000. ` +
			`The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",` +
			`"type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
		rateLimited = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. ` +
			`Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
		noModel = "{\"error\":{\"message\":\"Project `proj_abc` does not have access to model `gpt-4.1-2025-04-14`\"," +
			`"type":"invalid_request_error","param":null,"code":"model_not_found"}}`
		region = `{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported",` +
			`"param":null,"type":"request_forbidden"}}`
		// A message a client could provoke by quoting words: only the
		// provider's own code and message start count.
		quoted          = `{"error":{"message":"Invalid value: 'Request too large for the model_not_found'","type":"invalid_request_error","param":null,"code":"rate_limit_exceeded"}}`
		anthropicDenied = `{"type":"error","error":{"type":"permission_error","message":"Permission denied"},"request_id":"req_011"}`
	)
	type state struct{ cooling, disabled bool }
	for _, tc := range []struct {
		name, path, model, body string
		status                  int
		wantStatus              int
		wantCode                string // "" when the provider's answer is relayed as received
		wantRetry               string // x-should-retry
		want                    state
	}{
		{"openai request too large", "/v1/chat/completions", "gpt", tooLarge, 429, 429, "", "false", state{}},
		{"openai rate limit reached", "/v1/chat/completions", "gpt", rateLimited, 429, 429, "", "", state{cooling: true}},
		{"openai 429 quoting the words", "/v1/chat/completions", "gpt", quoted, 429, 429, "", "", state{cooling: true}},
		{"openai model not allowed", "/v1/chat/completions", "gpt", noModel, 403, 502, "upstream_model_refused", "false", state{}},
		{"openai region refused", "/v1/chat/completions", "gpt", region, 403, 502, "upstream_auth_failed", "true", state{disabled: true}},
		{"openai 403 not a document", "/v1/chat/completions", "gpt", "forbidden", 403, 502, "upstream_auth_failed", "true", state{disabled: true}},
		{"anthropic permission error", "/v1/messages", "claude", anthropicDenied, 403, 502, "", "true", state{disabled: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer prov.Close()
			h := newHandlerAt(t, Options{}, prov.URL+"/v1")
			srv := httptest.NewServer(h)
			defer srv.Close()
			body := `{"model":"` + tc.model + `","messages":[{"role":"user","content":"hi"}]}`
			if tc.path == "/v1/messages" {
				body = `{"model":"` + tc.model + `","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
			}
			resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, data)
			}
			if tc.wantCode == "" && tc.wantStatus == tc.status && string(data) != tc.body {
				t.Errorf("body %s, want the provider's answer as received", data)
			}
			if tc.wantCode != "" {
				if e, _ := provider.ReadError(data); e.Code != tc.wantCode {
					t.Errorf("code %q, want %q: %s", e.Code, tc.wantCode, data)
				}
			}
			if got := resp.Header.Get("X-Should-Retry"); got != tc.wantRetry {
				t.Errorf("x-should-retry %q, want %q", got, tc.wantRetry)
			}
			m, _ := h.o.Routes.Load().Model(tc.model)
			var pool []*routes.Target
			for _, p := range m.Pools {
				if len(p) > 0 {
					pool = p
					break
				}
			}
			v := pool[0].Backend.State.View()
			if got := (state{cooling: !v.CooldownUntil.IsZero(), disabled: v.Disabled}); got != tc.want {
				t.Errorf("backend %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestGeminiRetryInfoCools: Google puts its retry advice in the 429's
// body, not in Retry-After; the target rests for what it says (36 s here),
// not for the default rate-limit cooldown.
func TestGeminiRetryInfoCools(t *testing.T) {
	const body = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"36s"}]}}`
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		_, _ = io.WriteString(w, body)
	}))
	defer prov.Close()
	h := newHandlerAt(t, Options{}, prov.URL+"/v1")
	srv := httptest.NewServer(h)
	defer srv.Close()
	before := time.Now()
	resp, err := http.Post(srv.URL+"/v1beta/models/gemini:generateContent", "application/json",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || string(data) != body {
		t.Fatalf("status %d, body %s: want Google's 429 as received", resp.StatusCode, data)
	}
	m, _ := h.o.Routes.Load().Model("gemini")
	until := m.Pools[provider.GenerateContent][0].Backend.State.View().CooldownUntil
	if rest := until.Sub(before); rest < 35*time.Second || rest > 37*time.Second {
		t.Errorf("the target rests %v, want the 36 s Google asked for", rest)
	}
}

// TestGeminiCandidatesFinishApart: with several candidates, Gemini can
// finish one before the others; the chunks after it still reach the
// client, the stream ends clean when the last chunk finishes what is
// left, and a stream cut after a chunk that leaves a candidate running
// ends with the in-band error.
func TestGeminiCandidatesFinishApart(t *testing.T) {
	chunk := func(parts string) string { return "data: {\"candidates\":[" + parts + "]}\r\n\r\n" }
	c0 := `{"index":0,"content":{"parts":[{"text":"a"}]}}`
	c0done := `{"index":0,"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}`
	c1 := `{"index":1,"content":{"parts":[{"text":"x"}]}}`
	c1done := `{"index":1,"content":{"parts":[{"text":"z"}]},"finishReason":"STOP"}`
	for _, tc := range []struct {
		name   string
		chunks []string
		clean  bool
	}{
		{"the last chunk finishes the last candidate", []string{chunk(c0 + "," + c1), chunk(c0done), chunk(c1), chunk(c1done)}, true},
		{"cut while a candidate runs", []string{chunk(c0 + "," + c1), chunk(c1), chunk(c0 + "," + c1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, c := range tc.chunks {
					_, _ = io.WriteString(w, c)
					_ = http.NewResponseController(w).Flush()
				}
			}))
			defer prov.Close()
			h := newHandlerAt(t, Options{}, prov.URL+"/v1")
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/v1beta/models/gemini:streamGenerateContent?alt=sse", "application/json",
				strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"candidateCount":2}}`))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := string(data)
			for _, c := range tc.chunks {
				if !strings.Contains(body, strings.TrimSuffix(c, "\r\n\r\n")) {
					t.Errorf("chunk %s did not reach the client:\n%s", c, body)
				}
			}
			if gotErr := strings.Contains(body, `"error"`); gotErr == tc.clean {
				t.Errorf("in-band error %v, want %v:\n%s", gotErr, !tc.clean, body)
			}
		})
	}
}

// TestPiecesBody: an attempt's body is sent from its pieces, the client's
// bytes aliased, not copied (a 25 MB upload is held once), and reads the
// same whether the transport reads it in small steps or writes it whole.
func TestPiecesBody(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`)
	r, berr := openai.Chat.Inspect(body, "")
	if berr != nil {
		t.Fatal(berr.Msg)
	}
	model := []byte(`"provider-model-1"`)
	want := r.Rewrite(body, model, nil, true)
	split := func() *piecesBody {
		b := &piecesBody{}
		r.Split(body, model, nil, true, &b.p)
		return b
	}
	b := split()
	if b.p.Len() != len(want) {
		t.Fatalf("Len %d, want %d", b.p.Len(), len(want))
	}
	aliased := false
	for _, p := range b.p.Parts() {
		if i := bytes.Index(body, p); len(p) > 100 && i >= 0 && &body[i] == &p[0] {
			aliased = true // the messages are the client's own bytes, not a copy
		}
	}
	if !aliased {
		t.Error("the body's bytes were copied into the pieces")
	}
	for _, step := range []int{1, 7, 4096, 1 << 20} {
		b := split()
		var got []byte
		buf := make([]byte, step)
		for {
			n, err := b.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read in steps of %d: not the rewritten body", step)
		}
	}
	var w bytes.Buffer
	if n, err := split().WriteTo(&w); err != nil || n != int64(len(want)) || !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("WriteTo: %d, %v; equal %v", n, err, bytes.Equal(w.Bytes(), want))
	}
}
