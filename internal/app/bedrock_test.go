package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Claude on Amazon Bedrock, end to end: the official Anthropic SDK asks
// the node for a model whose preferred target is on Bedrock; the fake
// provider checks the SigV4 signature with the AWS SDK's signer and
// streams real event-stream frames.
const (
	bedrockModel     = "claude-clouds"
	bedrockProvModel = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
)

var bedrockKeys = fakeprovider.BedrockKeys{
	AccessKeyID:     "AKIDEXAMPLECANARY01",
	SecretAccessKey: "aws-secret-canary-wJalrXUtnFEMI",
	SessionToken:    "aws-session-canary-FwoGZXIvYXdz",
}

func bedrockParams(prompt string) anthropic.MessageNewParams {
	p := anthropicParams(prompt)
	p.Model = bedrockModel
	return p
}

func TestBedrockSDK(t *testing.T) {
	for _, egress := range []stackOptions{{egress: "socks", bedrock: true}, {egress: "connect", proxyAuth: true, bedrock: true}} {
		t.Run(egress.egress, func(t *testing.T) {
			s := startStack(t, egress)
			runBedrockSuite(t, s)
		})
	}
}

// TestBedrockThroughDante and TestBedrockThroughTinyproxy run the Bedrock
// suite through the real Debian proxies.
func TestBedrockThroughDante(t *testing.T) {
	addr := requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")
	runBedrockSuite(t, startStack(t, stackOptions{proxyURL: "socks5://" + addr, bedrock: true}))
}

func TestBedrockThroughTinyproxy(t *testing.T) {
	u := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	runBedrockSuite(t, startStack(t, stackOptions{proxyURL: u, bedrock: true}))
}

func runBedrockSuite(t *testing.T, s *stack) {
	ctx := t.Context()
	ac := anthropicClient(s, clientKey)
	t.Run("non-stream", func(t *testing.T) {
		msg, err := ac.Messages.New(ctx, bedrockParams("hello bedrock"), option.WithHeader("anthropic-beta", "beta-one, beta-two"))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := msg.Content[0].Text; got != "echo: hello bedrock" {
			t.Errorf("content = %q", got)
		}
		if msg.Usage.InputTokens == 0 {
			t.Error("usage missing")
		}
		last := lastProvRequest(t, s)
		if last.Protocol != fakeprovider.Bedrock || last.Model != bedrockProvModel {
			t.Fatalf("provider saw %s %s (%s), want the Bedrock model %s", last.Protocol, last.Path, last.Model, bedrockProvModel)
		}
		if !strings.HasPrefix(last.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+bedrockKeys.AccessKeyID+"/") {
			t.Error("the request is not SigV4-signed with the credential's key")
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(last.Body, &body); err != nil {
			t.Fatal(err)
		}
		if _, ok := body["model"]; ok {
			t.Error("the body still has a model member")
		}
		if got := string(body["anthropic_version"]); got != `"bedrock-2023-05-31"` {
			t.Errorf("anthropic_version = %s", got)
		}
		if got := string(body["anthropic_beta"]); got != `["beta-one","beta-two"]` {
			t.Errorf("anthropic_beta = %s", got)
		}
		for _, h := range []string{"Anthropic-Beta", "Anthropic-Version", "X-Api-Key"} {
			if last.Header.Get(h) != "" {
				t.Errorf("header %s went to Bedrock", h)
			}
		}
	})
	t.Run("stream", func(t *testing.T) {
		st := ac.Messages.NewStreaming(ctx, bedrockParams("hello stream [[chunks=4]]"))
		var msg anthropic.Message
		events := 0
		for st.Next() {
			events++
			if err := msg.Accumulate(st.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if got := msg.Content[0].Text; got != "echo: hello stream" {
			t.Errorf("content = %q", got)
		}
		if events < 6 || msg.Usage.OutputTokens == 0 {
			t.Errorf("%d events, usage %+v", events, msg.Usage)
		}
		if last := lastProvRequest(t, s); !strings.HasSuffix(last.Path, "/invoke-with-response-stream") {
			t.Errorf("provider path %q", last.Path)
		}
	})
	t.Run("count_tokens", func(t *testing.T) {
		// Bedrock's CountTokens, signed, counts for the foundation model
		// of the target's cross-region inference profile; its
		// {"inputTokens":N} reaches the SDK as {"input_tokens":N}.
		res, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    bedrockModel,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three four"))},
		}, option.WithHeader("anthropic-beta", "beta-one"))
		if err != nil {
			t.Fatalf("CountTokens: %v", err)
		}
		if res.InputTokens != 4 {
			t.Errorf("input tokens = %d, want 4", res.InputTokens)
		}
		last := lastProvRequest(t, s)
		const model = "anthropic.claude-sonnet-4-5-20250929-v1:0" // bedrockProvModel without "us."
		if last.Protocol != fakeprovider.Bedrock || last.Path != "/model/"+model+"/count-tokens" {
			t.Fatalf("provider saw %s %s, want Bedrock's count-tokens of %s", last.Protocol, last.Path, model)
		}
		if !strings.HasPrefix(last.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+bedrockKeys.AccessKeyID+"/") {
			t.Error("the request is not SigV4-signed with the credential's key")
		}
		var body struct {
			Input struct {
				InvokeModel struct {
					Body []byte `json:"body"`
				} `json:"invokeModel"`
			} `json:"input"`
		}
		if err := json.Unmarshal(last.Body, &body); err != nil {
			t.Fatal(err)
		}
		var invoke map[string]json.RawMessage
		if err := json.Unmarshal(body.Input.InvokeModel.Body, &invoke); err != nil {
			t.Fatalf("invoke body %q: %v", body.Input.InvokeModel.Body, err)
		}
		if _, ok := invoke["model"]; ok || string(invoke["anthropic_version"]) != `"bedrock-2023-05-31"` || string(invoke["anthropic_beta"]) != `["beta-one"]` {
			t.Errorf("invoke body %s: want Messages' Bedrock edits", body.Input.InvokeModel.Body)
		}
	})
}

// TestBedrockStreamFailures: an exception message in a Bedrock stream
// reaches the client as Anthropic's in-band error event, and a frame with
// a bad CRC is never relayed; neither reads as a complete answer.
func TestBedrockStreamFailures(t *testing.T) {
	var mu sync.Mutex
	var current fakeprovider.Behaviour
	script := func(fakeprovider.Request) *fakeprovider.Behaviour {
		mu.Lock()
		defer mu.Unlock()
		b := current
		return &b
	}
	s := startStack(t, stackOptions{bedrock: true, script: script})
	ac := anthropicClient(s, clientKey)
	for _, tc := range []struct {
		name string
		b    fakeprovider.Behaviour
		want string // in the SDK's error
	}{
		{"throttling exception", fakeprovider.Behaviour{Chunks: 4, ErrorEvent: true, ErrorAfter: 2, BedrockException: "throttlingException", ErrorMessage: "slow down"}, "rate_limit_error"},
		{"model stream error", fakeprovider.Behaviour{Chunks: 4, ErrorEvent: true, ErrorAfter: 2, BedrockException: "modelStreamErrorException", ErrorMessage: "model broke"}, "model broke"},
		{"bad crc", fakeprovider.Behaviour{Chunks: 4, BadCRC: true, ErrorAfter: 2}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			current = tc.b
			mu.Unlock()
			st := ac.Messages.NewStreaming(t.Context(), bedrockParams("hello"))
			var types []string
			for st.Next() {
				types = append(types, string(st.Current().Type))
			}
			err := st.Err()
			if err == nil {
				t.Fatalf("stream ended cleanly after %v; want an error", types)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
			for _, typ := range types {
				if typ == "message_stop" {
					t.Errorf("a message_stop reached the client: %v", types)
				}
			}
			if len(types) != 2 {
				t.Errorf("client saw events %v, want the 2 before the fault", types)
			}
		})
	}
}

// TestBedrockBadSignature: keys the provider does not accept are AWS's
// 403 InvalidSignatureException: the client gets the node's 502 (never a
// 401 or 403 about its own key) and the backend is disabled, so the next
// request goes to the Anthropic target.
func TestBedrockBadSignature(t *testing.T) {
	s := startStack(t, stackOptions{bedrock: true, bedrockSecret: "aws-secret-canary-WRONG"})
	r := s.do(http.MethodPost, "/v1/messages", map[string]string{"x-api-key": clientKey, "anthropic-version": "2023-06-01"},
		`{"model":"`+bedrockModel+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "rejected the gateway's credential") {
		t.Fatalf("status %d body %s, want 502 about the gateway's credential", r.status, r.body)
	}
	if last := lastProvRequest(t, s); last.Protocol != fakeprovider.Bedrock {
		t.Fatalf("first request went to %s", last.Protocol)
	}
	r = s.do(http.MethodPost, "/v1/messages", map[string]string{"x-api-key": clientKey, "anthropic-version": "2023-06-01"},
		`{"model":"`+bedrockModel+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("second request: status %d body %s", r.status, r.body)
	}
	if last := lastProvRequest(t, s); last.Protocol != fakeprovider.Anthropic {
		t.Errorf("second request went to %s, want the Anthropic target (Bedrock disabled)", last.Protocol)
	}
	if strings.Contains(s.logs.String(), "aws-secret-canary") {
		t.Error("an AWS secret appeared in the logs")
	}
}

// TestBedrockUsageEvent: the usage event of a Bedrock attempt names the
// platform and the region.
func TestBedrockUsageEvent(t *testing.T) {
	s := startStack(t, stackOptions{bedrock: true})
	ac := anthropicClient(s, clientKey)
	if _, err := ac.Messages.New(t.Context(), bedrockParams("hello")); err != nil {
		t.Fatal(err)
	}
	s.shutdown() // closes the outbox after the drain
	var ev *usageevent.Event
	for _, e := range s.outboxEvents(t) {
		if e.Backend == "br" {
			ev = e
		}
	}
	if ev == nil {
		t.Fatal("no event of the Bedrock backend")
	}
	if ev.Platform != usageevent.PlatformBedrock || ev.Region != "us-east-1" {
		t.Errorf("platform %q region %q, want bedrock us-east-1", ev.Platform, ev.Region)
	}
	if ev.Usage == nil || ev.Usage.InputTokens == 0 {
		t.Error("no usage")
	}
}

// lastProvRequest is the fake provider's last request, as it recorded it.
func lastProvRequest(t *testing.T, s *stack) fakeprovider.Request {
	t.Helper()
	reqs := s.prov.Requests()
	if len(reqs) == 0 {
		t.Fatal("the provider received no request")
	}
	return reqs[len(reqs)-1]
}
