package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithybearer "github.com/aws/smithy-go/auth/bearer"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Bedrock Runtime's own clients through a whole node (README.md "AWS SDK
// (Bedrock Runtime)"): the AWS SDK's InvokeModel and
// InvokeModelWithResponseStream, and the Anthropic SDK's Bedrock client,
// carry the node's client key as a Bedrock API key (Authorization:
// Bearer). The AWS SDK for Go sends a bearer token only over HTTPS, so the
// node listens with TLS here.

// bedrockStack is a node with TLS, the Anthropic target of anthropicModel
// and the Bedrock-first bedrockModel, and a client that trusts it.
// profileModel, named like an inference profile's ARN (":" and "/",
// which the AWS SDKs percent-encode), is on the Anthropic backend.
func bedrockStack(t *testing.T) (*stack, *http.Client) {
	t.Helper()
	cf, kf, pool := selfSigned(t)
	s := startStack(t, stackOptions{bedrock: true, tlsCert: cf, tlsKey: kf, extraTOML: profileTOML})
	return s, tlsClient(pool)
}

const profileModel = "arn:aws:bedrock:us-east-1:000000000000:application-inference-profile/demo"

var profileTOML = `
[models."` + profileModel + `"]
[[models."` + profileModel + `".targets]]
backend = "an"
model = "` + anthProvModel + `"
weight = 1
stream = true
`

func tlsClient(pool *x509.CertPool) *http.Client {
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true},
		Timeout:   20 * time.Second,
	}
}

// bedrockRuntime is the AWS SDK's Bedrock Runtime client for the node at
// s, sending key as its bearer token (what AWS_BEARER_TOKEN_BEDROCK sets).
func bedrockRuntime(s *stack, hc *http.Client, key string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.api),
		HTTPClient:   hc,
		BearerAuthTokenProvider: smithybearer.TokenProviderFunc(func(context.Context) (smithybearer.Token, error) {
			return smithybearer.Token{Value: key}, nil
		}),
		AuthSchemePreference: []string{"httpBearerAuth"},
		RetryMaxAttempts:     1,
	})
}

// invokeBody is an InvokeModel body for Claude: a Messages request in
// Bedrock's envelope.
func invokeBody(prompt string) []byte {
	return []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":` + quoteJSON(prompt) + `}]}`)
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestBedrockRuntimeSDK: InvokeModel and InvokeModelWithResponseStream,
// for a model served by Anthropic's own API and for one served by
// Bedrock, answer as Bedrock would; each request is one usage event.
func TestBedrockRuntimeSDK(t *testing.T) {
	s, hc := bedrockStack(t)
	ctx := t.Context()
	br := bedrockRuntime(s, hc, clientKey)
	for _, tc := range []struct {
		model    string
		protocol fakeprovider.Protocol
	}{
		{anthropicModel, fakeprovider.Anthropic},
		{bedrockModel, fakeprovider.Bedrock},
		{profileModel, fakeprovider.Anthropic},
	} {
		t.Run(tc.model+"/invoke", func(t *testing.T) {
			out, err := br.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{
				ModelId:     aws.String(tc.model),
				Body:        invokeBody("hello runtime"),
				ContentType: aws.String("application/json"),
				Accept:      aws.String("application/json"),
			})
			if err != nil {
				t.Fatalf("InvokeModel: %v", err)
			}
			var msg anthropic.Message
			if err := json.Unmarshal(out.Body, &msg); err != nil {
				t.Fatalf("answer %s: %v", out.Body, err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != "echo: hello runtime" || msg.Usage.InputTokens == 0 {
				t.Errorf("answer %s", out.Body)
			}
			if last := lastProvRequest(t, s); last.Protocol != tc.protocol || last.Stream {
				t.Errorf("provider saw %s %s (stream %v), want a whole %s request", last.Protocol, last.Path, last.Stream, tc.protocol)
			}
		})
		t.Run(tc.model+"/stream", func(t *testing.T) {
			out, err := br.InvokeModelWithResponseStream(ctx, &bedrockruntime.InvokeModelWithResponseStreamInput{
				ModelId:     aws.String(tc.model),
				Body:        invokeBody("hello stream [[chunks=3]]"),
				ContentType: aws.String("application/json"),
			})
			if err != nil {
				t.Fatalf("InvokeModelWithResponseStream: %v", err)
			}
			st := out.GetStream()
			var msg anthropic.Message
			var types []string
			for ev := range st.Events() {
				chunk, ok := ev.(*brtypes.ResponseStreamMemberChunk)
				if !ok {
					t.Fatalf("event %T, want a chunk", ev)
				}
				var e anthropic.MessageStreamEventUnion
				if err := json.Unmarshal(chunk.Value.Bytes, &e); err != nil {
					t.Fatalf("chunk %s: %v", chunk.Value.Bytes, err)
				}
				types = append(types, e.Type)
				if err := msg.Accumulate(e); err != nil {
					t.Fatalf("Accumulate: %v", err)
				}
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if err := st.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if len(types) < 4 || types[0] != "message_start" || types[len(types)-1] != "message_stop" {
				t.Errorf("events %v", types)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != "echo: hello stream" || msg.Usage.OutputTokens == 0 {
				t.Errorf("streamed message %+v", msg)
			}
			last := lastProvRequest(t, s)
			streamed := last.Stream || strings.HasSuffix(last.Path, "/invoke-with-response-stream")
			if last.Protocol != tc.protocol || !streamed {
				t.Errorf("provider saw %s %s (stream %v), want a streaming %s request", last.Protocol, last.Path, last.Stream, tc.protocol)
			}
		})
	}
	s.shutdown()
	assertOneEventEach(t, s, 6)
}

// assertOneEventEach checks that the node recorded n usage events, each
// of a Messages request that answered 200 with its usage.
func assertOneEventEach(t *testing.T, s *stack, n int) {
	t.Helper()
	evs := s.outboxEvents(t)
	if len(evs) != n {
		t.Fatalf("%d usage events, want %d (one per request)", len(evs), n)
	}
	for i, ev := range evs {
		if ev.Endpoint != usageevent.EndpointMessages || ev.HTTPStatus != 200 || ev.Usage == nil || ev.Usage.InputTokens == 0 || ev.Usage.OutputTokens == 0 {
			t.Errorf("event %d: endpoint %q status %d usage %+v", i, ev.Endpoint, ev.HTTPStatus, ev.Usage)
		}
	}
}

// anthropicBedrock is the Anthropic SDK's Bedrock client for the node at
// s, with a Bedrock API key (bearer) or, when creds is set, SigV4.
func anthropicBedrock(s *stack, hc *http.Client, key string, creds aws.CredentialsProvider) anthropic.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: creds}
	if creds == nil {
		cfg.BearerAuthTokenProvider = bedrock.NewStaticBearerTokenProvider(key)
		cfg.AuthSchemePreference = []string{"httpBearerAuth"}
	}
	return anthropic.NewClient(
		bedrock.WithConfig(cfg),
		aoption.WithBaseURL(s.api),
		aoption.WithHTTPClient(hc),
		aoption.WithMaxRetries(0),
		aoption.WithRequestTimeout(20*time.Second),
	)
}

// TestAnthropicBedrockSDK: the Anthropic SDK's Bedrock client, with a
// Bedrock API key, for a model served by Anthropic's own API and for one
// served by Bedrock, each whole and streamed; one usage event each.
func TestAnthropicBedrockSDK(t *testing.T) {
	s, hc := bedrockStack(t)
	ctx := t.Context()
	ac := anthropicBedrock(s, hc, clientKey, nil)
	for _, tc := range []struct {
		model    string
		protocol fakeprovider.Protocol
	}{
		{anthropicModel, fakeprovider.Anthropic},
		{bedrockModel, fakeprovider.Bedrock},
	} {
		t.Run(tc.model+"/whole", func(t *testing.T) {
			p := anthropicParams("hello sdk")
			p.Model = anthropic.Model(tc.model)
			msg, err := ac.Messages.New(ctx, p)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if msg.Content[0].Text != "echo: hello sdk" || msg.Usage.InputTokens == 0 {
				t.Errorf("message %+v", msg)
			}
			if last := lastProvRequest(t, s); last.Protocol != tc.protocol {
				t.Errorf("provider saw %s %s, want %s", last.Protocol, last.Path, tc.protocol)
			}
		})
		t.Run(tc.model+"/stream", func(t *testing.T) {
			p := anthropicParams("hello sdk stream [[chunks=3]]")
			p.Model = anthropic.Model(tc.model)
			st := ac.Messages.NewStreaming(ctx, p)
			var msg anthropic.Message
			for st.Next() {
				if err := msg.Accumulate(st.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if msg.Content[0].Text != "echo: hello sdk stream" || msg.Usage.OutputTokens == 0 {
				t.Errorf("message %+v", msg)
			}
			if last := lastProvRequest(t, s); last.Protocol != tc.protocol {
				t.Errorf("provider saw %s %s, want %s", last.Protocol, last.Path, tc.protocol)
			}
		})
	}
	s.shutdown()
	assertOneEventEach(t, s, 4)
}

// TestBedrockSigV4Refused: a SigV4-signed request (the SDKs' default with
// AWS credentials) cannot be verified by a node that holds no AWS
// secret: both SDKs get a 401 in Bedrock's shape naming the header to
// use, and nothing is sent to a provider.
func TestBedrockSigV4Refused(t *testing.T) {
	s, hc := bedrockStack(t)
	ctx := t.Context()
	creds := credentials.NewStaticCredentialsProvider("AKIDCLIENTEXAMPLE", "client-secret-example", "")

	br := bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.api), HTTPClient: hc, Credentials: creds, RetryMaxAttempts: 1,
	})
	_, err := br.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String(anthropicModel), Body: invokeBody("hi"), ContentType: aws.String("application/json")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "UnrecognizedClientException" || !strings.Contains(ae.ErrorMessage(), "does not accept AWS SigV4 signatures") {
		t.Errorf("AWS SDK with SigV4: %v, want UnrecognizedClientException about SigV4", err)
	}
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusUnauthorized {
		t.Errorf("AWS SDK with SigV4: %v, want status 401", err)
	}

	ac := anthropicBedrock(s, hc, "", creds)
	p := anthropicParams("hi")
	p.Model = anthropicModel
	_, err = ac.Messages.New(ctx, p)
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusUnauthorized || !strings.Contains(aerr.Error(), "AWS_BEARER_TOKEN_BEDROCK") {
		t.Errorf("Anthropic SDK with SigV4: %v, want 401 naming AWS_BEARER_TOKEN_BEDROCK", err)
	}
	if n := s.prov.RequestCount(); n != 0 {
		t.Errorf("provider saw %d requests, want 0", n)
	}
}

// TestBedrockRuntimeCountTokens: the AWS SDK's CountTokens, with an
// InvokeModel body, is count_tokens on the model's target: the SDK reads
// the count, and the request is one usage event of count_tokens, without
// usage.
func TestBedrockRuntimeCountTokens(t *testing.T) {
	s, hc := bedrockStack(t)
	br := bedrockRuntime(s, hc, clientKey)
	out, err := br.CountTokens(t.Context(), &bedrockruntime.CountTokensInput{
		ModelId: aws.String(anthropicModel),
		Input:   &brtypes.CountTokensInputMemberInvokeModel{Value: brtypes.InvokeModelTokensRequest{Body: invokeBody("one two three four")}},
	})
	if err != nil {
		t.Fatalf("CountTokens: %v", err)
	}
	if out.InputTokens == nil || *out.InputTokens != 4 {
		t.Errorf("input tokens %v, want 4", out.InputTokens)
	}
	last := lastProvRequest(t, s)
	if last.Path != "/v1/messages/count_tokens" || last.Model != anthProvModel || strings.Contains(string(last.Body), "max_tokens") {
		t.Errorf("provider saw %s %s", last.Path, last.Body)
	}
	s.shutdown()
	evs := s.outboxEvents(t)
	if len(evs) != 1 || evs[0].Endpoint != usageevent.EndpointCountTokens || evs[0].HTTPStatus != 200 || evs[0].Usage != nil {
		t.Fatalf("events %+v, want one count_tokens event without usage", evs)
	}
}

// TestBedrockRuntimeErrors: the AWS SDK reads the node's refusals and a
// provider's failures as the typed Bedrock exceptions: an unknown model,
// an error inside a stream (an exception frame), and a provider's 429.
func TestBedrockRuntimeErrors(t *testing.T) {
	var mu sync.Mutex
	var current fakeprovider.Behaviour
	script := func(fakeprovider.Request) *fakeprovider.Behaviour {
		mu.Lock()
		defer mu.Unlock()
		b := current
		return &b
	}
	cf, kf, pool := selfSigned(t)
	s := startStack(t, stackOptions{bedrock: true, tlsCert: cf, tlsKey: kf, script: script, attempts: 1})
	br := bedrockRuntime(s, tlsClient(pool), clientKey)
	ctx := t.Context()
	behave := func(b fakeprovider.Behaviour) {
		mu.Lock()
		current = b
		mu.Unlock()
	}

	_, err := br.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String("no-such-model"), Body: invokeBody("hi"), ContentType: aws.String("application/json")})
	var notFound *brtypes.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		t.Errorf("unknown model: %v, want a ResourceNotFoundException", err)
	}

	behave(fakeprovider.Behaviour{Chunks: 4, ErrorEvent: true, ErrorAfter: 2})
	out, err := br.InvokeModelWithResponseStream(ctx, &bedrockruntime.InvokeModelWithResponseStreamInput{ModelId: aws.String(anthropicModel), Body: invokeBody("hello stream"), ContentType: aws.String("application/json")})
	if err != nil {
		t.Fatalf("InvokeModelWithResponseStream: %v", err)
	}
	st := out.GetStream()
	chunks := 0
	for range st.Events() {
		chunks++
	}
	st.Close()
	var unavailable *brtypes.ServiceUnavailableException
	if err := st.Err(); !errors.As(err, &unavailable) || chunks != 2 {
		t.Errorf("stream error after %d chunks: %v, want a ServiceUnavailableException after 2", chunks, err)
	}

	behave(fakeprovider.Behaviour{Status: 429, ErrorMessage: "slow down"})
	_, err = br.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String(anthropicModel), Body: invokeBody("hi"), ContentType: aws.String("application/json")})
	var throttled *brtypes.ThrottlingException
	if !errors.As(err, &throttled) {
		t.Errorf("provider 429: %v, want a ThrottlingException", err)
	}
}
