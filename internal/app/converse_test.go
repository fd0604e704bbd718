package app

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithybearer "github.com/aws/smithy-go/auth/bearer"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Amazon Bedrock's Converse API end to end: the AWS SDK's Bedrock Runtime
// client, with the node's key as its Bedrock API key (a bearer token,
// as AWS_BEARER_TOKEN_BEDROCK makes it), calls Converse and
// ConverseStream on the node; the node signs the request for the fake
// Bedrock with SigV4 and sends the body as it came. The AWS SDK for Go
// sends a bearer token only over HTTPS, so the node listens with TLS.
const (
	converseModel     = "nova"
	converseProvModel = "us.amazon.nova-pro-v1:0"
	// converseARN is a public model named like an inference-profile ARN:
	// the SDK percent-encodes its ":" and "/" in the path.
	converseARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.nova"
)

// converseTOML is the Converse backend "bc" (the stack's aws credential,
// which bedrock: true adds) and the models on it.
// startStack replaces #PROV_ROOT# with the fake provider's root URL.
func converseTOML() string {
	return `
[backends.bc]
protocol = "bedrock_converse"
platform = "bedrock"
region = "us-east-1"
base_url = "#PROV_ROOT#"
credential = "aws"
max_inflight_per_node = 16
[models.` + converseModel + `]
[[models.` + converseModel + `.targets]]
backend = "bc"
model = "` + converseProvModel + `"
weight = 1
stream = true
tools = true
[models."` + converseARN + `"]
[[models."` + converseARN + `".targets]]
backend = "bc"
model = "` + converseARN + `"
weight = 1
stream = true
`
}

// startConverse starts a TLS node with the Converse backend; o says how
// it reaches the provider.
func startConverse(t *testing.T, o stackOptions) (*stack, *bedrockruntime.Client) {
	t.Helper()
	cf, kf, pool := selfSigned(t)
	o.tlsCert, o.tlsKey, o.bedrock = cf, kf, true
	o.extraTOML += converseTOML()
	s := startStack(t, o)
	return s, converseClient(s, pool, clientKey)
}

// converseClient is the AWS SDK's Bedrock Runtime client for the node, with
// key as its Bedrock API key, no retries.
func converseClient(s *stack, pool *x509.CertPool, key string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:                  "us-east-1",
		BaseEndpoint:            aws.String(s.api),
		BearerAuthTokenProvider: smithybearer.StaticTokenProvider{Token: smithybearer.Token{Value: key}},
		AuthSchemePreference:    []string{"httpBearerAuth"},
		RetryMaxAttempts:        1,
		HTTPClient: &http.Client{Transport: heldBody{&http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}}},
	})
}

// heldBody sends a request body read into memory first. Without it, one
// ConverseStream in about fifteen failed in the client with "use of
// closed network connection" (mid-stream, or after the last event) while
// the node's log showed the stream complete, and a plain client reading
// the same streams on one connection never failed (240 pairs); with it,
// none failed in 60 runs. The likeliest cause is on the client's side:
// net/http closes a connection whose request-body write fails after the
// answer has begun, and the SDK's request body is the one difference.
type heldBody struct{ rt http.RoundTripper }

func (h heldBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return h.rt.RoundTrip(r)
}

func converseInput(model, prompt string) *bedrockruntime.ConverseInput {
	return &bedrockruntime.ConverseInput{
		ModelId: aws.String(model),
		Messages: []brtypes.Message{{
			Role:    brtypes.ConversationRoleUser,
			Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: prompt}},
		}},
		InferenceConfig: &brtypes.InferenceConfiguration{MaxTokens: aws.Int32(256)},
	}
}

func converseStreamInput(model, prompt string) *bedrockruntime.ConverseStreamInput {
	in := converseInput(model, prompt)
	return &bedrockruntime.ConverseStreamInput{ModelId: in.ModelId, Messages: in.Messages, InferenceConfig: in.InferenceConfig}
}

// TestConverseSDK: Converse and ConverseStream through the in-process
// SOCKS5 and CONNECT proxies.
func TestConverseSDK(t *testing.T) {
	for _, o := range []stackOptions{{egress: "socks"}, {egress: "connect", proxyAuth: true}} {
		t.Run(o.egress, func(t *testing.T) {
			s, c := startConverse(t, o)
			runConverseSuite(t, s, c)
		})
	}
}

// TestConverseThroughDante and TestConverseThroughTinyproxy run the
// Converse suite through the real Debian proxies.
func TestConverseThroughDante(t *testing.T) {
	addr := requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")
	s, c := startConverse(t, stackOptions{proxyURL: "socks5://" + addr})
	runConverseSuite(t, s, c)
}

func TestConverseThroughTinyproxy(t *testing.T) {
	u := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	s, c := startConverse(t, stackOptions{proxyURL: u})
	runConverseSuite(t, s, c)
}

func runConverseSuite(t *testing.T, s *stack, c *bedrockruntime.Client) {
	ctx := t.Context()
	t.Run("converse", func(t *testing.T) {
		out, err := c.Converse(ctx, converseInput(converseModel, "hello converse"))
		if err != nil {
			t.Fatalf("Converse: %v", err)
		}
		msg, ok := out.Output.(*brtypes.ConverseOutputMemberMessage)
		if !ok || len(msg.Value.Content) != 1 {
			t.Fatalf("output %#v", out.Output)
		}
		if text := msg.Value.Content[0].(*brtypes.ContentBlockMemberText).Value; text != "echo: hello converse" {
			t.Errorf("text %q", text)
		}
		if out.Usage == nil || aws.ToInt32(out.Usage.InputTokens) == 0 || out.StopReason != brtypes.StopReasonEndTurn {
			t.Errorf("usage %+v stop %q", out.Usage, out.StopReason)
		}
		last := lastProvRequest(t, s)
		if last.Protocol != fakeprovider.BedrockConverse || last.Model != converseProvModel || last.Path != "/model/"+converseProvModel+"/converse" {
			t.Fatalf("provider saw %s %s (%s)", last.Protocol, last.Path, last.Model)
		}
		if !strings.HasPrefix(last.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+bedrockKeys.AccessKeyID+"/") {
			t.Errorf("provider Authorization %q: want the node's SigV4 signature", last.Header.Get("Authorization"))
		}
		if strings.Contains(string(last.Body), `"model`) || !json.Valid(last.Body) || !strings.Contains(string(last.Body), `"maxTokens":256`) {
			t.Errorf("provider body %s: want the client's, without a model", last.Body)
		}
		if strings.Contains(last.Header.Get("Authorization"), clientKey) {
			t.Error("the client's key reached the provider")
		}
	})
	t.Run("converse stream", func(t *testing.T) {
		out, err := c.ConverseStream(ctx, converseStreamInput(converseModel, "hello stream [[chunks=4]]"))
		if err != nil {
			t.Fatalf("ConverseStream: %v", err)
		}
		st := out.GetStream()
		defer st.Close()
		var (
			text  strings.Builder
			seen  []string
			usage *brtypes.TokenUsage
		)
		for ev := range st.Events() {
			switch v := ev.(type) {
			case *brtypes.ConverseStreamOutputMemberMessageStart:
				seen = append(seen, "messageStart")
			case *brtypes.ConverseStreamOutputMemberContentBlockDelta:
				seen = append(seen, "contentBlockDelta")
				if d, ok := v.Value.Delta.(*brtypes.ContentBlockDeltaMemberText); ok {
					text.WriteString(d.Value)
				}
			case *brtypes.ConverseStreamOutputMemberContentBlockStop:
				seen = append(seen, "contentBlockStop")
			case *brtypes.ConverseStreamOutputMemberMessageStop:
				seen = append(seen, "messageStop")
			case *brtypes.ConverseStreamOutputMemberMetadata:
				seen = append(seen, "metadata")
				usage = v.Value.Usage
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v (events %v)", err, seen)
		}
		if text.String() != "echo: hello stream" || len(seen) != 8 || seen[len(seen)-1] != "metadata" {
			t.Errorf("text %q events %v", text.String(), seen)
		}
		if usage == nil || aws.ToInt32(usage.InputTokens) == 0 || aws.ToInt32(usage.OutputTokens) != 4 {
			t.Errorf("usage %+v", usage)
		}
		if last := lastProvRequest(t, s); last.Path != "/model/"+converseProvModel+"/converse-stream" || !last.Stream {
			t.Errorf("provider path %q", last.Path)
		}
	})
	t.Run("arn model id", func(t *testing.T) {
		// The SDK sends /model/arn%3Aaws%3A…%2Fus.nova/converse: one
		// segment, decoded once.
		if _, err := c.Converse(ctx, converseInput(converseARN, "hello arn")); err != nil {
			t.Fatalf("Converse: %v", err)
		}
		last := lastProvRequest(t, s)
		if last.Model != converseARN || last.Path != "/model/"+converseARN+"/converse" {
			t.Errorf("provider saw %s (%s)", last.Path, last.Model)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		_, err := c.Converse(ctx, converseInput("no-such-model", "hello"))
		var nf *brtypes.ResourceNotFoundException
		if !errors.As(err, &nf) {
			t.Fatalf("err %v (%T), want ResourceNotFoundException", err, err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		_, err := converseClientLike(c, "sk-wrong").Converse(ctx, converseInput(converseModel, "hello"))
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("err %v, want a 401", err)
		}
	})
}

// converseClientLike is c with another bearer token.
func converseClientLike(c *bedrockruntime.Client, key string) *bedrockruntime.Client {
	o := c.Options()
	o.BearerAuthTokenProvider = smithybearer.StaticTokenProvider{Token: smithybearer.Token{Value: key}}
	return bedrockruntime.New(o)
}

// TestConverseStreamException: an exception in Bedrock's stream reaches
// the SDK as that exception, after the events before it.
func TestConverseStreamException(t *testing.T) {
	script := func(r fakeprovider.Request) *fakeprovider.Behaviour {
		if r.Protocol != fakeprovider.BedrockConverse {
			return nil
		}
		return &fakeprovider.Behaviour{Chunks: 4, ErrorEvent: true, ErrorAfter: 2, BedrockException: "modelStreamErrorException", ErrorMessage: "model broke"}
	}
	s, c := startConverse(t, stackOptions{script: script})
	out, err := c.ConverseStream(t.Context(), converseStreamInput(converseModel, "hello"))
	if err != nil {
		t.Fatalf("ConverseStream: %v", err)
	}
	st := out.GetStream()
	defer st.Close()
	n := 0
	for range st.Events() {
		n++
	}
	var mse *brtypes.ModelStreamErrorException
	if err := st.Err(); !errors.As(err, &mse) || !strings.Contains(err.Error(), "model broke") {
		t.Fatalf("stream err %v (%T), want ModelStreamErrorException", err, err)
	}
	if n != 2 {
		t.Errorf("%d events before the exception, want 2", n)
	}
	_ = s
}

// TestConverseUsageEvent: one usage event per attempt, protocol
// bedrock_converse, its endpoint, the platform and region, and the usage
// read from the answer and from the stream's metadata event.
func TestConverseUsageEvent(t *testing.T) {
	s, c := startConverse(t, stackOptions{})
	if _, err := c.Converse(t.Context(), converseInput(converseModel, "one two three [[cache_read=5]]")); err != nil {
		t.Fatal(err)
	}
	out, err := c.ConverseStream(t.Context(), converseStreamInput(converseModel, "four five [[chunks=3]]"))
	if err != nil {
		t.Fatal(err)
	}
	st := out.GetStream()
	for range st.Events() {
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	s.shutdown() // closes the outbox after the drain
	got := map[string]*usageevent.Event{}
	for _, e := range s.outboxEvents(t) {
		if e.Backend == "bc" {
			got[e.Endpoint] = e
		}
	}
	whole, stream := got[usageevent.EndpointConverse], got[usageevent.EndpointConverseStream]
	if whole == nil || stream == nil || len(got) != 2 {
		t.Fatalf("events %v: want one converse and one converse_stream", got)
	}
	for _, e := range []*usageevent.Event{whole, stream} {
		if e.Protocol != usageevent.ProtocolBedrockConverse || e.Platform != usageevent.PlatformBedrock || e.Region != "us-east-1" ||
			e.ProviderModel != converseProvModel || e.PublicModel != converseModel || e.HTTPStatus != 200 {
			t.Errorf("event %+v", e)
		}
	}
	// The fake counts the prompt's words as input (the directive is one)
	// and adds the cache reads it was told to report: input_tokens counts
	// them too, as Bedrock's totalTokens does.
	if u := whole.Usage; u == nil || u.InputTokens != 4+5 || u.CacheReadTokens != 5 || u.OutputTokens == 0 {
		t.Errorf("converse usage %+v", whole.Usage)
	}
	if u := stream.Usage; u == nil || u.InputTokens != 3 || u.OutputTokens != 3 || !stream.Stream {
		t.Errorf("converse_stream usage %+v (stream %v)", stream.Usage, stream.Stream)
	}
}
