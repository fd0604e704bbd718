package anthropic

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
)

func TestBedrockURL(t *testing.T) {
	base, _ := url.Parse("https://bedrock-runtime.us-east-1.amazonaws.com")
	tests := []struct {
		name, model string
		stream      bool
		want        string
	}{
		{"model id", "anthropic.claude-sonnet-4-5-20250929-v1:0", false,
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke"},
		{"inference profile, stream", "us.anthropic.claude-3-7-sonnet-20250219-v1:0", true,
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-3-7-sonnet-20250219-v1%3A0/invoke-with-response-stream"},
		{"arn", "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", false,
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3/invoke"},
		{"space and percent", "a b%c", false,
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/a%20b%25c/invoke"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := bedrockURL(base, tt.model, tt.stream)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.String(); got != tt.want {
				t.Errorf("URL = %s, want %s", got, tt.want)
			}
			back, err := url.Parse(u.String())
			if err != nil {
				t.Fatal(err)
			}
			seg := strings.Split(strings.TrimPrefix(back.Path, "/model/"), "/invoke")[0]
			if seg != tt.model {
				t.Errorf("model read back from the path = %q, want %q", seg, tt.model)
			}
		})
	}
}

// TestBedrockBody: the model member becomes anthropic_version (and
// anthropic_beta), and every other byte of the client's body reaches
// Bedrock unchanged.
func TestBedrockBody(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		betas []string
		want  string
	}{
		{"first member", `{"model":"claude","max_tokens":5,"messages":[]}`, nil,
			`{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[]}`},
		{"last member, spaces kept", "{ \"max_tokens\" : 5,\n  \"messages\": [] ,\n  \"model\"  :\t\"claude\"\n}", nil,
			"{ \"max_tokens\" : 5,\n  \"messages\": [] ,\n  \"anthropic_version\":\"bedrock-2023-05-31\"\n}"},
		{"middle, escaped name", `{"max_tokens":5,"mod\u0065l":"claude","messages":[{"role":"user","content":"model"}]}`, nil,
			`{"max_tokens":5,"anthropic_version":"bedrock-2023-05-31","messages":[{"role":"user","content":"model"}]}`},
		{"betas", `{"model":"claude","max_tokens":5,"messages":[]}`, []string{"a-2025, b-2025", "c"},
			`{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["a-2025","b-2025","c"],"max_tokens":5,"messages":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, berr := inspectMessages([]byte(tt.body), "")
			if berr != nil {
				t.Fatal(berr)
			}
			h := http.Header{}
			for _, b := range tt.betas {
				h.Add("Anthropic-Beta", b)
			}
			var p provider.Pieces
			if err := bedrockBody(&r, []byte(tt.body), h, &p); err != nil {
				t.Fatal(err)
			}
			got := string(bytes.Join(p.Parts(), nil))
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("body (-got +want):\n%s", diff)
			}
			if p.Len() != len(tt.want) {
				t.Errorf("Len = %d, want %d", p.Len(), len(tt.want))
			}
		})
	}
}

func TestBedrockHeader(t *testing.T) {
	h := Header(http.Header{"Anthropic-Beta": {"x"}, "Accept": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}, "key")
	bedrockHeader(h, "abc")
	want := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer abc"}}
	if diff := cmp.Diff(h, want); diff != "" {
		t.Errorf("headers (-got +want):\n%s", diff)
	}
}

// frame encodes one event-stream message with the SDK's codec.
func frame(t testing.TB, headers map[string]string, payload []byte) []byte {
	t.Helper()
	var m eventstream.Message
	for k, v := range headers {
		m.Headers.Set(k, eventstream.StringValue(v))
	}
	m.Payload = payload
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func chunkFrame(t testing.TB, event string) []byte {
	payload := `{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(event)) + `","p":"abcdefgh"}`
	return frame(t, map[string]string{":message-type": "event", ":event-type": "chunk", ":content-type": "application/json"}, []byte(payload))
}

func exceptionFrame(t testing.TB, name, msg string) []byte {
	return frame(t, map[string]string{":message-type": "exception", ":exception-type": name, ":content-type": "application/json"}, []byte(`{"message":"`+msg+`"}`))
}

const (
	evStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}`
	evDelta = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`
	evStop  = `{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":12,"outputTokenCount":3}}`
)

func TestEventStream(t *testing.T) {
	var in []byte
	in = append(in, chunkFrame(t, evStart)...)
	in = append(in, chunkFrame(t, evDelta)...)
	in = append(in, frame(t, map[string]string{":message-type": "event", ":event-type": "metadata"}, []byte(`{}`))...)
	in = append(in, chunkFrame(t, "{\"type\":\"ping\",\n\"x\":1}")...)
	in = append(in, chunkFrame(t, evStop)...)
	got, err := io.ReadAll(NewEventStream(bytes.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	want := "event: message_start\ndata: " + evStart + "\n\n" +
		"event: content_block_delta\ndata: " + evDelta + "\n\n" +
		"event: ping\ndata: {\"type\":\"ping\",\ndata: \"x\":1}\n\n" +
		"event: message_stop\ndata: " + evStop + "\n\n"
	if diff := cmp.Diff(string(got), want); diff != "" {
		t.Errorf("SSE (-got +want):\n%s", diff)
	}
}

// TestEventStreamException: an exception message after events becomes
// Anthropic's in-band error event, and the stream then ends.
func TestEventStreamException(t *testing.T) {
	tests := []struct {
		name, kind string
	}{
		{"throttlingException", "rate_limit_error"},
		{"modelStreamErrorException", "api_error"},
		{"validationException", "invalid_request_error"},
		{"internalServerException", "api_error"},
		{"serviceUnavailableException", "overloaded_error"},
		{"somethingNewException", "api_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append(chunkFrame(t, evStart), exceptionFrame(t, tt.name, "too fast")...)
			got, err := io.ReadAll(NewEventStream(bytes.NewReader(in)))
			if err != nil {
				t.Fatal(err)
			}
			want := "event: message_start\ndata: " + evStart + "\n\n" +
				`event: error` + "\n" + `data: {"type":"error","error":{"type":"` + tt.kind + `","message":"too fast"}}` + "\n\n"
			if diff := cmp.Diff(string(got), want); diff != "" {
				t.Errorf("SSE (-got +want):\n%s", diff)
			}
		})
	}
}

// TestEventStreamBadCRC: a frame whose checksum is wrong is an error, and
// none of its bytes come out; the frames before it do.
func TestEventStreamBadCRC(t *testing.T) {
	bad := chunkFrame(t, evDelta)
	bad[len(bad)-20] ^= 0x01 // a payload byte: the message CRC no longer matches
	in := append(chunkFrame(t, evStart), bad...)
	got, err := io.ReadAll(NewEventStream(bytes.NewReader(in)))
	if !errors.Is(err, ErrEventStream) {
		t.Fatalf("err = %v, want ErrEventStream", err)
	}
	if want := "event: message_start\ndata: " + evStart + "\n\n"; string(got) != want {
		t.Errorf("read %q before the error, want %q", got, want)
	}
}

// TestEventStreamFlushesPerFrame: a frame's event is readable before the
// next frame arrives.
func TestEventStreamFlushesPerFrame(t *testing.T) {
	pr, pw := io.Pipe()
	s := NewEventStream(pr)
	go func() {
		_, _ = pw.Write(chunkFrame(t, evStart))
	}()
	buf := make([]byte, 4096)
	n, err := s.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if want := "event: message_start\ndata: " + evStart + "\n\n"; string(buf[:n]) != want {
		t.Errorf("first read %q, want %q", buf[:n], want)
	}
	pw.Close()
}

func TestBedrockErrorAnswer(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		errType string
		body    string
		want    string
	}{
		{"throttling", 429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", `{"message":"Too many requests"}`,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Too many requests"}}`},
		{"access denied", 403, "AccessDeniedException", `{"Message":"You don't have access"}`,
			`{"type":"error","error":{"type":"permission_error","message":"You don't have access"}}`},
		{"validation from __type", 400, "", `{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`},
		{"not json", 502, "", `<html>`,
			`{"type":"error","error":{"type":"api_error","message":"Bad Gateway"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {"99"}}, ContentLength: 99}
			if tt.errType != "" {
				resp.Header.Set("X-Amzn-Errortype", tt.errType)
			}
			got, err := io.ReadAll(bedrockAnswer(resp, strings.NewReader(tt.body)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("answer = %s, want %s", got, tt.want)
			}
			if resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "" {
				t.Errorf("length still says %d / %q", resp.ContentLength, resp.Header.Get("Content-Length"))
			}
		})
	}
}

func FuzzEventStream(f *testing.F) {
	f.Add(append(chunkFrame(f, evStart), chunkFrame(f, evStop)...))
	f.Add(exceptionFrame(f, "throttlingException", "x"))
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := NewEventStream(bytes.NewReader(in))
		out, err := io.ReadAll(s)
		if err != nil && !errors.Is(err, ErrEventStream) {
			t.Fatalf("error %v is not ErrEventStream", err)
		}
		// Whatever came out is whole SSE events.
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("output %q does not end an event", out)
		}
	})
}

func FuzzBedrockModelPath(f *testing.F) {
	for _, s := range []string{"anthropic.claude-v2:1", "arn:aws:bedrock:us-east-1:1:inference-profile/us.x", "a/b%2F", "ü", ""} {
		f.Add(s)
	}
	base, _ := url.Parse("https://bedrock-runtime.us-east-1.amazonaws.com/pre")
	f.Fuzz(func(t *testing.T, model string) {
		seg := BedrockModelPath(model)
		for i := range len(seg) {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~%", c) >= 0) {
				t.Fatalf("segment %q has %q", seg, c)
			}
		}
		if back, err := url.PathUnescape(seg); err != nil || back != model {
			t.Fatalf("segment %q unescapes to %q, %v; want %q", seg, back, err, model)
		}
		if model == "" {
			return
		}
		u, err := bedrockURL(base, model, false)
		if err != nil {
			t.Fatal(err)
		}
		p, err := url.Parse(u.String())
		if err != nil {
			t.Fatal(err)
		}
		if want := "/pre/model/" + model + "/invoke"; p.Path != want {
			t.Fatalf("path %q, want %q", p.Path, want)
		}
	})
}
