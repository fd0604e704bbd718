package converse

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

func TestModelSegment(t *testing.T) {
	tests := []struct {
		path      string
		model, op string
		ok        bool
		code      string
	}{
		{"/model/demo-nova/converse", "demo-nova", "converse", true, ""},
		{"/model/us.amazon.nova-pro-v1%3A0/converse-stream", "us.amazon.nova-pro-v1:0", "converse-stream", true, ""},
		{"/model/us.amazon.nova-pro-v1:0/converse", "us.amazon.nova-pro-v1:0", "converse", true, ""},
		{"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.amazon.nova-pro-v1%3A0/converse",
			"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0", "converse", true, ""},
		{"/model/a%20b/converse", "a b", "converse", true, ""},
		// Refused: a "/" not encoded, a doubly encoded id, bad escapes.
		{"/model/arn:aws:bedrock:us-east-1:1:inference-profile/us.nova/converse", "", "converse", true, "invalid_model"},
		{"/model/us.nova%253A0/converse", "", "converse", true, "non_canonical_path"},
		{"/model/us.nova%25%33A0/converse", "", "converse", true, "non_canonical_path"},
		{"/model/bad%zz/converse", "", "converse", true, "non_canonical_path"},
		{"/model//converse", "", "converse", true, "invalid_model"},
		{"/model/%2F/converse", "/", "converse", true, ""},
		// Not this shape.
		{"/model/m", "", "", false, ""},
		{"/models/m/converse", "", "", false, ""},
		{"/model/m/convers%65", "", "", false, ""},
		{"/model/m/", "", "", false, ""},
		{"/v1/messages", "", "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			model, op, ok, berr := ModelSegment(tt.path)
			code := ""
			if berr != nil {
				code = berr.Code
			}
			if model != tt.model || op != tt.op || ok != tt.ok || code != tt.code {
				t.Errorf("ModelSegment = %q, %q, %v, %q; want %q, %q, %v, %q", model, op, ok, code, tt.model, tt.op, tt.ok, tt.code)
			}
		})
	}
}

// TestDoors: each endpoint's door takes only its own operation, and says
// whether it streams.
func TestDoors(t *testing.T) {
	for _, tt := range []struct {
		spec   *provider.Spec
		path   string
		ok     bool
		stream bool
	}{
		{Converse, "/model/m%3A1/converse", true, false},
		{Converse, "/model/m%3A1/converse-stream", false, false},
		{Converse, "/model/m%3A1/invoke", false, false},
		{ConverseStream, "/model/m%3A1/converse-stream", true, true},
		{ConverseStream, "/model/m%3A1/converse", false, false},
	} {
		model, stream, ok, berr := tt.spec.Doors[0].Match(tt.path)
		if ok != tt.ok || stream != tt.stream || berr != nil || ok && model != "m:1" {
			t.Errorf("%v door(%s) = %q, %v, %v, %v", tt.spec.Endpoint, tt.path, model, stream, ok, berr)
		}
	}
}

func TestInspect(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		stream bool
		want   provider.Request
		code   string
	}{
		{"plain", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, false, provider.Request{Model: "m"}, ""},
		{"stream", `{"messages":[]}`, true, provider.Request{Model: "m", Stream: true, Need: provider.CapStream}, ""},
		{"tools", `{"messages":[],"toolConfig":{"tools":[{"toolSpec":{"name":"t"}}]}}`, false, provider.Request{Model: "m", Need: provider.CapTools}, ""},
		{"no tools", `{"messages":[],"toolConfig":{"tools":[]}}`, false, provider.Request{Model: "m"}, ""},
		{"max tokens", `{"messages":[],"inferenceConfig":{"maxTokens":512,"temperature":0.5}}`, false, provider.Request{Model: "m", MaxOutput: 512}, ""},
		{"bad max tokens", `{"messages":[],"inferenceConfig":{"maxTokens":"many"}}`, false, provider.Request{}, "invalid_output_cap"},
		{"twin maxTokens", `{"messages":[],"inferenceConfig":{"maxTokens":5,"MaxTokens":500}}`, false, provider.Request{}, "ambiguous_member"},
		{"twin toolConfig", `{"toolConfig":{"tools":[]},"ToolConfig":{"tools":[{}]}}`, false, provider.Request{}, "ambiguous_member"},
		{"twin tools", `{"toolConfig":{"tools":[],"tools":[{}]}}`, false, provider.Request{}, "ambiguous_member"},
		{"modelId", `{"modelId":"other","messages":[]}`, false, provider.Request{}, "invalid_model"},
		{"not an object", `[]`, false, provider.Request{}, "invalid_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, berr := inspect([]byte(tt.body), "m", tt.stream)
			if tt.code != "" {
				if berr == nil || berr.Code != tt.code {
					t.Fatalf("inspect = %v, want %s", berr, tt.code)
				}
				return
			}
			if berr != nil {
				t.Fatal(berr)
			}
			r.Prefix = provider.Prefix{}
			if diff := cmp.Diff(r, tt.want); diff != "" {
				t.Errorf("request (-got +want):\n%s", diff)
			}
		})
	}
}

// encode frames messages as Bedrock sends them, with the SDK's codec.
func encode(t testing.TB, msgs ...eventstream.Message) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, m := range msgs {
		if err := enc.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func event(typ, payload string) eventstream.Message {
	var m eventstream.Message
	m.Headers.Set(":message-type", eventstream.StringValue("event"))
	m.Headers.Set(":event-type", eventstream.StringValue(typ))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Payload = []byte(payload)
	return m
}

func exception(typ, payload string) eventstream.Message {
	var m eventstream.Message
	m.Headers.Set(":message-type", eventstream.StringValue("exception"))
	m.Headers.Set(":exception-type", eventstream.StringValue(typ))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Payload = []byte(payload)
	return m
}

// TestEventStream: Bedrock's frames become SSE events of the same type
// and payload, one per frame, however the bytes are split into reads; a
// frame whose checksum is wrong is an error, never an event.
func TestEventStream(t *testing.T) {
	in := encode(t,
		event("messageStart", `{"role":"assistant"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`),
		event("messageStop", `{"stopReason":"end_turn"}`),
		event("metadata", `{"usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},"metrics":{"latencyMs":1}}`),
		exception("throttlingException", `{"message":"slow down"}`),
	)
	want := "event: messageStart\ndata: {\"role\":\"assistant\"}\n\n" +
		"event: contentBlockDelta\ndata: {\"contentBlockIndex\":0,\"delta\":{\"text\":\"Hi\"}}\n\n" +
		"event: messageStop\ndata: {\"stopReason\":\"end_turn\"}\n\n" +
		"event: metadata\ndata: {\"usage\":{\"inputTokens\":3,\"outputTokens\":1,\"totalTokens\":4},\"metrics\":{\"latencyMs\":1}}\n\n" +
		"event: throttlingException\ndata: {\"message\":\"slow down\"}\n\n"
	for name, r := range map[string]io.Reader{
		"whole":    bytes.NewReader(in),
		"one byte": iotest.OneByteReader(bytes.NewReader(in)),
		"half":     iotest.HalfReader(bytes.NewReader(in)),
	} {
		got, err := io.ReadAll(newEventStream(r))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	bad := bytes.Clone(in)
	bad[len(bad)-1] ^= 1
	if _, err := io.ReadAll(newEventStream(bytes.NewReader(bad))); !errors.Is(err, ErrEventStream) {
		t.Errorf("bad checksum: %v, want ErrEventStream", err)
	}
}

// TestWriterRoundTrip: what the relay writes (the SSE the envelope made,
// in any pieces) reaches the client as the frames Bedrock sent, payloads
// byte for byte, exceptions as exceptions; keepalive comments vanish.
func TestWriterRoundTrip(t *testing.T) {
	frames := []eventstream.Message{
		event("messageStart", `{"role":"assistant"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"a\nb"}}`),
		event("metadata", `{"usage":{"inputTokens":3,"outputTokens":1}}`),
		exception("modelStreamErrorException", `{"message":"boom","originalStatusCode":500}`),
	}
	sseBytes, err := io.ReadAll(newEventStream(bytes.NewReader(encode(t, frames...))))
	if err != nil {
		t.Fatal(err)
	}
	sseBytes = append([]byte(": keepalive\n\n"), sseBytes...)
	for _, step := range []int{1, 3, 7, len(sseBytes)} {
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "text/event-stream")
		w := NewWriter(rec)
		w.WriteHeader(http.StatusOK)
		for i := 0; i < len(sseBytes); i += step {
			if _, err := w.Write(sseBytes[i:min(i+step, len(sseBytes))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		if ct := rec.Header().Get("Content-Type"); ct != eventStreamType {
			t.Errorf("Content-Type %q", ct)
		}
		dec := eventstream.NewDecoder()
		for i, want := range frames {
			m, err := dec.Decode(rec.Body, nil)
			if err != nil {
				t.Fatalf("step %d, frame %d: %v", step, i, err)
			}
			if !bytes.Equal(m.Payload, want.Payload) || provider.EventStreamHeader(m.Headers, ":message-type") != provider.EventStreamHeader(want.Headers, ":message-type") ||
				provider.EventStreamHeader(m.Headers, ":event-type") != provider.EventStreamHeader(want.Headers, ":event-type") ||
				provider.EventStreamHeader(m.Headers, ":exception-type") != provider.EventStreamHeader(want.Headers, ":exception-type") {
				t.Errorf("step %d, frame %d = %v %q, want %v %q", step, i, m.Headers, m.Payload, want.Headers, want.Payload)
			}
		}
		if rec.Body.Len() != 0 {
			t.Errorf("step %d: %d bytes after the frames", step, rec.Body.Len())
		}
	}
}

// TestWriterError: an error answer keeps its body and gets its
// exception's name, unless the provider's came with one.
func TestWriterError(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(ErrorBody("slow"))
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := rec.Header().Get("X-Amzn-Errortype"); got != "ThrottlingException" {
		t.Errorf("x-amzn-ErrorType %q", got)
	}
	if rec.Body.String() != `{"message":"slow"}` {
		t.Errorf("body %q", rec.Body)
	}
	rec = httptest.NewRecorder()
	w = NewWriter(rec)
	w.Header().Set("X-Amzn-Errortype", "ServiceQuotaExceededException:http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.WriteHeader(http.StatusTooManyRequests)
	if got := rec.Header().Get("X-Amzn-Errortype"); !strings.HasPrefix(got, "ServiceQuotaExceededException") {
		t.Errorf("the provider's x-amzn-ErrorType was replaced: %q", got)
	}
}

func TestTrackerAndTerminal(t *testing.T) {
	s := &Stream{}
	data := []byte(`{"metrics":{"latencyMs":9},"usage":{"inputTokens":10,"outputTokens":4,"cacheReadInputTokens":100,"totalTokens":114}}`)
	for _, ev := range []sse.Event{{Type: "messageStart", Data: []byte(`{"role":"assistant"}`)}, {Type: "metadata", Data: data}} {
		if s.Observe(&ev) {
			t.Error("an event was hidden")
		}
	}
	clear(data) // the reader reuses its buffer
	u, raw, ok := s.Usage()
	if !ok || u.InputTokens != 110 || u.OutputTokens != 4 || u.CacheReadTokens != 100 ||
		string(raw) != `{"inputTokens":10,"outputTokens":4,"cacheReadInputTokens":100,"totalTokens":114}` {
		t.Errorf("Usage = %+v, %s, %v", u, raw, ok)
	}
	for typ, want := range map[string][2]bool{
		"messageStop": {true, false}, "metadata": {true, false}, "contentBlockDelta": {false, false},
		"throttlingException": {false, true}, "internalServerException": {false, true},
	} {
		done, failed := Terminal(&sse.Event{Type: typ})
		if [2]bool{done, failed} != want {
			t.Errorf("Terminal(%s) = %v, %v", typ, done, failed)
		}
	}
}

func TestEnvelopeURL(t *testing.T) {
	base, _ := url.Parse("https://bedrock-runtime.us-east-1.amazonaws.com")
	u, err := ConverseStream.Envelopes[provider.Bedrock].URL(base, "arn:aws:bedrock:us-east-1:1:inference-profile/us.nova:0", true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.String(), "https://bedrock-runtime.us-east-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.nova%3A0/converse-stream"; got != want {
		t.Errorf("URL = %s, want %s", got, want)
	}
	if _, err := Converse.Envelopes[provider.Bedrock].URL(base, "", false); err == nil {
		t.Error("an empty model made a URL")
	}
}
