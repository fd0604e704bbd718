package fakeprovider_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
)

// The official SDKs, pointed straight at the fake, are the judges of wire
// fidelity here. Retries are off so every SDK call is exactly one request.

func openAIClient(base, key string, opts ...ooption.RequestOption) openai.Client {
	return openai.NewClient(append([]ooption.RequestOption{
		ooption.WithBaseURL(base + "/"), // openai-go joins "chat/completions" onto the base URL
		ooption.WithAPIKey(key),
		ooption.WithMaxRetries(0),
		ooption.WithRequestTimeout(5 * time.Second),
	}, opts...)...)
}

func anthropicClient(base, key string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithoutEnvironmentDefaults(),
		aoption.WithBaseURL(strings.TrimSuffix(base, "/v1")), // the SDK adds "v1/messages" itself
		aoption.WithAPIKey(key),
		aoption.WithMaxRetries(0),
		aoption.WithRequestTimeout(5 * time.Second),
	}, opts...)...)
}

func openAIParams(prompt string, includeUsage bool) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage(prompt)},
	}
	if includeUsage {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	return p
}

func anthropicParams(prompt string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 64,
		System:    []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}
}

// answer is what a test compares, whatever the protocol.
type answer struct {
	Model, Text, Stop                            string
	Input, Output, CacheRead, CacheWrite, Reason int64
	Deltas                                       int // content deltas seen on a stream
}

func TestOpenAISDK(t *testing.T) {
	tests := []struct {
		name         string
		prompt       string
		stream       bool
		includeUsage bool
		want         answer
	}{
		{
			name:   "non-stream",
			prompt: "hello there",
			want:   answer{Model: "gpt-test", Text: "echo: hello there", Stop: "stop", Input: 4, Output: 3},
		},
		{
			name:   "stream without usage",
			prompt: "hello there",
			stream: true,
			want:   answer{Model: "gpt-test", Text: "echo: hello there", Stop: "stop", Deltas: 3},
		},
		{
			name:         "stream with usage",
			prompt:       "hello there [[chunks=5]] [[cache_read=4]] [[reasoning=2]]",
			stream:       true,
			includeUsage: true,
			want: answer{
				Model: "gpt-test", Text: "echo: hello there", Stop: "stop",
				Input: 2 + 5 + 4, Output: 5 + 2, CacheRead: 4, Reason: 2, Deltas: 5,
			},
		},
	}
	p, base := start(t, nil)
	c := openAIClient(base, openAIKey)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			params := openAIParams(tt.prompt, tt.includeUsage)
			var cc openai.ChatCompletion
			var deltas int
			if !tt.stream {
				res, err := c.Chat.Completions.New(ctx, params)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				cc = *res
			} else {
				s := c.Chat.Completions.NewStreaming(ctx, params)
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					chunk := s.Current()
					if !acc.AddChunk(chunk) {
						t.Fatalf("accumulator rejected chunk %s", chunk.RawJSON())
					}
					if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
						deltas++
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				cc = acc.ChatCompletion
			}
			if len(cc.Choices) != 1 {
				t.Fatalf("choices = %d, want 1", len(cc.Choices))
			}
			got := answer{
				Model: cc.Model, Text: cc.Choices[0].Message.Content, Stop: cc.Choices[0].FinishReason,
				Input: cc.Usage.PromptTokens, Output: cc.Usage.CompletionTokens,
				CacheRead: cc.Usage.PromptTokensDetails.CachedTokens,
				Reason:    cc.Usage.CompletionTokensDetails.ReasoningTokens,
				Deltas:    deltas,
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("answer (-got +want):\n%s", diff)
			}
			if tot := cc.Usage.TotalTokens; tot != tt.want.Input+tt.want.Output {
				t.Errorf("total_tokens = %d, want %d", tot, tt.want.Input+tt.want.Output)
			}
			reqs := p.Requests()
			last := reqs[len(reqs)-1]
			if last.Stream != tt.stream || last.IncludeUsage != tt.includeUsage {
				t.Errorf("recorded stream=%v include_usage=%v, want %v %v", last.Stream, last.IncludeUsage, tt.stream, tt.includeUsage)
			}
		})
	}
}

func TestAnthropicSDK(t *testing.T) {
	tests := []struct {
		name   string
		prompt string
		stream bool
		want   answer
	}{
		{
			name:   "non-stream",
			prompt: "hello there [[cache_read=4]] [[cache_write=2]]",
			want: answer{
				Model: "claude-test", Text: "echo: hello there", Stop: "end_turn",
				Input: 2 + 4, Output: 3, CacheRead: 4, CacheWrite: 2,
			},
		},
		{
			name:   "stream",
			prompt: "hello there [[chunks=4]] [[cache_read=4]] [[cache_write=2]]",
			stream: true,
			want: answer{
				Model: "claude-test", Text: "echo: hello there", Stop: "end_turn",
				Input: 2 + 5, Output: 4, CacheRead: 4, CacheWrite: 2, Deltas: 4,
			},
		},
	}
	_, base := start(t, nil)
	c := anthropicClient(base, anthropicKey)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			var msg anthropic.Message
			var deltas int
			if !tt.stream {
				res, err := c.Messages.New(ctx, anthropicParams(tt.prompt))
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				msg = *res
			} else {
				s := c.Messages.NewStreaming(ctx, anthropicParams(tt.prompt))
				for s.Next() {
					ev := s.Current()
					if err := msg.Accumulate(ev); err != nil {
						t.Fatalf("Accumulate: %v", err)
					}
					if ev.Type == "content_block_delta" {
						deltas++
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
			}
			if len(msg.Content) != 1 {
				t.Fatalf("content blocks = %d, want 1", len(msg.Content))
			}
			got := answer{
				Model: msg.Model, Text: msg.Content[0].Text, Stop: string(msg.StopReason),
				Input: msg.Usage.InputTokens, Output: msg.Usage.OutputTokens,
				CacheRead: msg.Usage.CacheReadInputTokens, CacheWrite: msg.Usage.CacheCreationInputTokens,
				Deltas: deltas,
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("answer (-got +want):\n%s", diff)
			}
		})
	}
}

// sdkError is the part of an SDK API error a test compares.
type sdkError struct {
	Status             int
	Kind               string // OpenAI "type/code", Anthropic error.type
	RetryAfter, ReqID  string
	SetCookie, RateLim bool
}

func TestSDKErrors(t *testing.T) {
	tests := []struct {
		name   string
		proto  fakeprovider.Protocol
		key    string // "" = the right key
		prompt string
		stream bool
		want   sdkError
	}{
		{
			name: "openai 429 with retry-after", proto: fakeprovider.OpenAI, prompt: "hi [[status=429]] [[retry_after=7]]",
			want: sdkError{Status: 429, Kind: "requests/rate_limit_exceeded", RetryAfter: "7"},
		},
		{
			name: "openai 429 on a stream", proto: fakeprovider.OpenAI, prompt: "hi [[status=429]] [[retry_after=7]]", stream: true,
			want: sdkError{Status: 429, Kind: "requests/rate_limit_exceeded", RetryAfter: "7"},
		},
		{
			name: "openai quota", proto: fakeprovider.OpenAI, prompt: "[[quota]]",
			want: sdkError{Status: 429, Kind: "insufficient_quota/insufficient_quota"},
		},
		{
			name: "openai 500", proto: fakeprovider.OpenAI, prompt: "[[status=500]]",
			want: sdkError{Status: 500, Kind: "server_error/"},
		},
		{
			name: "openai scripted 401", proto: fakeprovider.OpenAI, prompt: "[[status=401]]",
			want: sdkError{Status: 401, Kind: "invalid_request_error/invalid_api_key"},
		},
		{
			name: "openai wrong key", proto: fakeprovider.OpenAI, key: "sk-wrong", prompt: "hi",
			want: sdkError{Status: 401, Kind: "invalid_request_error/invalid_api_key"},
		},
		{
			name: "anthropic 429 with retry-after", proto: fakeprovider.Anthropic, prompt: "hi [[status=429]] [[retry_after=7]]",
			want: sdkError{Status: 429, Kind: "rate_limit_error", RetryAfter: "7"},
		},
		{
			name: "anthropic 529 on a stream", proto: fakeprovider.Anthropic, prompt: "[[status=529]]", stream: true,
			want: sdkError{Status: 529, Kind: "overloaded_error"},
		},
		{
			name: "anthropic 500", proto: fakeprovider.Anthropic, prompt: "[[status=500]]",
			want: sdkError{Status: 500, Kind: "api_error"},
		},
		{
			name: "anthropic wrong key", proto: fakeprovider.Anthropic, key: "sk-wrong", prompt: "hi",
			want: sdkError{Status: 401, Kind: "authentication_error"},
		},
	}
	p, base := start(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.Reset()
			tt.want.ReqID, tt.want.SetCookie, tt.want.RateLim = "req_fake000001", true, true
			var err error
			var got sdkError
			var resp *http.Response
			if tt.proto == fakeprovider.OpenAI {
				key := openAIKey
				if tt.key != "" {
					key = tt.key
				}
				c := openAIClient(base, key)
				if tt.stream {
					s := c.Chat.Completions.NewStreaming(t.Context(), openAIParams(tt.prompt, true))
					for s.Next() {
						t.Fatal("stream yielded an event")
					}
					err = s.Err()
				} else {
					_, err = c.Chat.Completions.New(t.Context(), openAIParams(tt.prompt, false))
				}
				var oe *openai.Error
				if !errors.As(err, &oe) {
					t.Fatalf("error %v (%T) is not an *openai.Error", err, err)
				}
				resp = oe.Response
				got = sdkError{Status: oe.StatusCode, Kind: oe.Type + "/" + oe.Code, ReqID: resp.Header.Get("x-request-id")}
				got.RateLim = resp.Header.Get("x-ratelimit-limit-requests") != ""
			} else {
				key := anthropicKey
				if tt.key != "" {
					key = tt.key
				}
				c := anthropicClient(base, key)
				if tt.stream {
					s := c.Messages.NewStreaming(t.Context(), anthropicParams(tt.prompt))
					for s.Next() {
						t.Fatal("stream yielded an event")
					}
					err = s.Err()
				} else {
					_, err = c.Messages.New(t.Context(), anthropicParams(tt.prompt))
				}
				var ae *anthropic.Error
				if !errors.As(err, &ae) {
					t.Fatalf("error %v (%T) is not an *anthropic.Error", err, err)
				}
				resp = ae.Response
				got = sdkError{Status: ae.StatusCode, Kind: string(ae.Type()), ReqID: ae.RequestID}
				got.RateLim = resp.Header.Get("anthropic-ratelimit-requests-limit") != ""
			}
			got.RetryAfter = resp.Header.Get("Retry-After")
			got.SetCookie = resp.Header.Get("Set-Cookie") != ""
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("error (-got +want):\n%s", diff)
			}
			if n := p.RequestCount(); n != 1 {
				t.Errorf("RequestCount = %d, want 1 (no SDK retry)", n)
			}
		})
	}
}

func TestSDKConnectionFaults(t *testing.T) {
	_, base := start(t, nil)
	oc := openAIClient(base, openAIKey)
	ac := anthropicClient(base, anthropicKey)

	t.Run("reset after body", func(t *testing.T) {
		_, oerr := oc.Chat.Completions.New(t.Context(), openAIParams("hi [[reset=after_body]]", false))
		_, aerr := ac.Messages.New(t.Context(), anthropicParams("hi [[reset=after_body]]"))
		for _, err := range []error{oerr, aerr} {
			var oe *openai.Error
			var ae *anthropic.Error
			if errors.As(err, &oe) || errors.As(err, &ae) || !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("error = %v (%T), want a connection reset", err, err)
			}
		}
	})

	t.Run("cut non-stream", func(t *testing.T) {
		_, err := oc.Chat.Completions.New(t.Context(), openAIParams("hi [[cut=after_events:0]]", false))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("error = %v, want unexpected EOF", err)
		}
	})

	t.Run("cut openai stream", func(t *testing.T) {
		s := oc.Chat.Completions.NewStreaming(t.Context(), openAIParams("hi [[cut=after_events:2]]", true))
		n := 0
		for s.Next() {
			n++
		}
		if n != 2 || !errors.Is(s.Err(), io.ErrUnexpectedEOF) {
			t.Errorf("got %d chunks, err %v; want 2 chunks, unexpected EOF", n, s.Err())
		}
	})

	t.Run("cut anthropic stream", func(t *testing.T) {
		s := ac.Messages.NewStreaming(t.Context(), anthropicParams("hi [[cut=after_events:2]]"))
		n := 0
		for s.Next() {
			n++
		}
		if n != 2 || !errors.Is(s.Err(), io.ErrUnexpectedEOF) {
			t.Errorf("got %d events, err %v; want 2 events, unexpected EOF", n, s.Err())
		}
	})

	t.Run("openai error event", func(t *testing.T) {
		s := oc.Chat.Completions.NewStreaming(t.Context(), openAIParams("hi [[error_event=after:2]]", true))
		n := 0
		for s.Next() {
			n++
		}
		var se *ssestream.StreamError
		if n != 2 || !errors.As(s.Err(), &se) {
			t.Errorf("got %d chunks, err %v (%T); want 2 chunks, *ssestream.StreamError", n, s.Err(), s.Err())
		}
	})

	t.Run("anthropic error event", func(t *testing.T) {
		// Three wire events (message_start, content_block_start, ping); the
		// SDK hides the ping.
		s := ac.Messages.NewStreaming(t.Context(), anthropicParams("hi [[error_event=after:3]]"))
		n := 0
		for s.Next() {
			n++
		}
		var ae *anthropic.Error
		if n != 2 || !errors.As(s.Err(), &ae) || ae.Type() != "overloaded_error" {
			t.Errorf("got %d events, err %v; want 2 events, overloaded_error", n, s.Err())
		}
	})
}

func TestDelays(t *testing.T) {
	_, base := start(t, nil)
	c := openAIClient(base, openAIKey)
	tests := []struct {
		name    string
		prompt  string
		stream  bool
		atLeast time.Duration
	}{
		{"delay before headers", "hi [[delay_ms=80]]", false, 80 * time.Millisecond},
		// role, 2 content, finish, [DONE]: four gaps.
		{"delay between events", "hi [[chunks=2]] [[event_delay_ms=20]]", true, 4 * 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			begin := time.Now()
			if tt.stream {
				s := c.Chat.Completions.NewStreaming(t.Context(), openAIParams(tt.prompt, false))
				for s.Next() {
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := c.Chat.Completions.New(t.Context(), openAIParams(tt.prompt, false)); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(begin); took < tt.atLeast {
				t.Errorf("took %v, want at least %v", took, tt.atLeast)
			}
		})
	}
}

// hangScript makes every request hang and closes entered when the first one
// reached the provider.
func hangScript() (func(fakeprovider.Request) *fakeprovider.Behaviour, chan struct{}) {
	entered := make(chan struct{})
	var once sync.Once
	return func(fakeprovider.Request) *fakeprovider.Behaviour {
		once.Do(func() { close(entered) })
		return &fakeprovider.Behaviour{Hang: true}
	}, entered
}

func TestHangEndsWithClientCancel(t *testing.T) {
	script, entered := hangScript()
	_, base := start(t, script)
	c := openAIClient(base, openAIKey)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Chat.Completions.New(ctx, openAIParams("hi", false))
		errc <- err
	}()
	<-entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
	// Cleanup's Close waits for the handler: it must have seen the cancel.
}

func TestCloseEndsHangingRequest(t *testing.T) {
	script, entered := hangScript()
	p := fakeprovider.New(fakeprovider.Options{Script: script})
	base, err := p.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := anthropicClient(base, "any")
	errc := make(chan error, 1)
	go func() {
		_, err := c.Messages.New(t.Context(), anthropicParams("hi"))
		errc <- err
	}()
	<-entered
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var ae *anthropic.Error
	if err := <-errc; err == nil || errors.As(err, &ae) {
		t.Errorf("error = %v, want a connection error", err)
	}
	if _, err := p.Start("127.0.0.1:0"); !errors.Is(err, fakeprovider.ErrStarted) {
		t.Errorf("Start after Close = %v, want ErrStarted", err)
	}
}

func TestScriptOverridesDirectives(t *testing.T) {
	var mu sync.Mutex
	var seen []fakeprovider.Request
	_, base := start(t, func(r fakeprovider.Request) *fakeprovider.Behaviour {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r)
		if r.Seq == 1 {
			return &fakeprovider.Behaviour{Status: http.StatusServiceUnavailable}
		}
		return nil // directives decide
	})
	c := openAIClient(base, openAIKey)

	_, err := c.Chat.Completions.New(t.Context(), openAIParams("hi [[chunks=1]]", false))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first call error = %v, want 503", err)
	}
	res, err := c.Chat.Completions.New(t.Context(), openAIParams("hi [[chunks=1]]", false))
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	if got := res.Usage.CompletionTokens; got != 1 {
		t.Errorf("completion_tokens = %d, want 1 ([[chunks=1]] applied)", got)
	}

	mu.Lock()
	defer mu.Unlock()
	type view struct {
		Seq      int64
		Protocol fakeprovider.Protocol
		Model    string
		Prompt   string
	}
	var got []view
	for _, r := range seen {
		got = append(got, view{r.Seq, r.Protocol, r.Model, r.Prompt})
	}
	want := []view{
		{1, fakeprovider.OpenAI, "gpt-test", "hi [[chunks=1]]"},
		{2, fakeprovider.OpenAI, "gpt-test", "hi [[chunks=1]]"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("script saw (-got +want):\n%s", diff)
	}
}

func TestModelsSDK(t *testing.T) {
	_, base := start(t, nil)
	want := []string{"gpt-4o-mini", "claude-sonnet-4-5"}

	oc := openAIClient(base, openAIKey)
	op, err := oc.Models.List(t.Context())
	if err != nil {
		t.Fatalf("openai Models.List: %v", err)
	}
	var got []string
	for _, m := range op.Data {
		got = append(got, m.ID)
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("openai models (-got +want):\n%s", diff)
	}

	ac := anthropicClient(base, anthropicKey)
	ap, err := ac.Models.List(t.Context(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatalf("anthropic Models.List: %v", err)
	}
	got = nil
	for _, m := range ap.Data {
		got = append(got, m.ID)
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("anthropic models (-got +want):\n%s", diff)
	}
}

func TestStartTLS(t *testing.T) {
	p := fakeprovider.New(fakeprovider.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	base, pool, err := p.StartTLS("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("base URL = %q, want https://127.0.0.1:…", base)
	}
	if _, err := p.Start("127.0.0.1:0"); !errors.Is(err, fakeprovider.ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(hc.CloseIdleConnections)

	oc := openAIClient(base, openAIKey, ooption.WithHTTPClient(hc))
	ac := anthropicClient(base, anthropicKey, aoption.WithHTTPClient(hc))
	res, err := oc.Chat.Completions.New(t.Context(), openAIParams("over tls", false))
	if err != nil {
		t.Fatalf("openai over TLS: %v", err)
	}
	if got := res.Choices[0].Message.Content; got != "echo: over tls" {
		t.Errorf("content = %q", got)
	}

	s := ac.Messages.NewStreaming(t.Context(), anthropicParams("over tls"))
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "echo: over tls" {
		t.Errorf("anthropic stream over TLS: err %v, message %+v", err, msg.Content)
	}

	_, err = oc.Chat.Completions.New(t.Context(), openAIParams("[[reset=after_body]]", false))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reset over TLS: error = %v, want a connection reset", err)
	}
	if n := p.ConnCount(); n != 1 {
		t.Errorf("ConnCount = %d, want 1 (all three requests on one kept-alive connection)", n)
	}

	untrusted := &http.Client{Transport: &http.Transport{}}
	if resp, err := post(t, untrusted, "GET", base+"/models", openAIHeader(), ""); err == nil {
		resp.Body.Close()
		t.Error("a client without the pool trusted the self-signed certificate")
	}
}
