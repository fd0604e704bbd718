package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
)

// FuzzBedrockModelSegment: whatever the path, the matcher does not panic;
// a model id it accepts is not empty, holds no percent-escape, and is
// read back the same from its one encoding (the AWS SDKs'), so no two
// readers of the path can disagree on it.
func FuzzBedrockModelSegment(f *testing.F) {
	for _, p := range []string{
		"/model/claude/invoke",
		"/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream",
		"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/count-tokens",
		"/model/a%253Ab/invoke",
		"/model/a/b/invoke",
		"/model//invoke",
		"/model/%zz/invoke",
		"/model/x",
		"/v1/messages",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		model, op, ok, berr := BedrockModelSegment(path)
		if !ok {
			if berr != nil || model != "" {
				t.Fatalf("%q: not a Bedrock path, yet model %q err %v", path, model, berr)
			}
			return
		}
		if berr != nil {
			if model != "" {
				t.Fatalf("%q: refused (%s) with model %q", path, berr.Msg, model)
			}
			return
		}
		if model == "" || provider.DoublyEncoded(model) {
			t.Fatalf("%q: accepted model %q", path, model)
		}
		again, op2, ok, berr := BedrockModelSegment("/model/" + url.PathEscape(model) + "/" + op)
		if !ok || berr != nil || again != model || op2 != op {
			t.Fatalf("%q: model %q op %q reads back as %q %q (ok %v, %v)", path, model, op, again, op2, ok, berr)
		}
	})
}

// sseEvent is one SSE event the fuzzed stream carries.
type sseEvent struct{ Type, Data string }

// FuzzBedrockWriter: an SSE answer written to the Bedrock writer in any
// pieces reaches the client as AWS event-stream frames that the AWS SDK's
// decoder reads back to the same events: one chunk per event, its bytes
// the event's data unchanged, pings left out, an error event as an
// exception.
func FuzzBedrockWriter(f *testing.F) {
	f.Add([]byte("message_start\x00{\"type\":\"message_start\"}\x01ping\x00{}\x01message_stop\x00{\"type\":\"message_stop\"}"), []byte{3, 1, 200})
	f.Add([]byte("content_block_delta\x00{\"d\":\"\xc3\xa9 \\u0041\"}\x01error\x00{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}"), []byte{0, 7})
	f.Add([]byte("\x00x\x01\x00y"), []byte{1})
	f.Fuzz(func(t *testing.T, spec, cuts []byte) {
		// spec is events separated by 0x01, each "type 0x00 data"; a
		// type or data line break is not what a Messages stream holds
		// (its data is one JSON line), so it is taken out.
		var events []sseEvent
		var stream bytes.Buffer
		clean := func(b []byte) string {
			return strings.Map(func(r rune) rune {
				if r == '\r' || r == '\n' {
					return -1
				}
				return r
			}, string(b))
		}
		for ev := range bytes.SplitSeq(spec, []byte{1}) {
			typ, data, _ := bytes.Cut(ev, []byte{0})
			e := sseEvent{strings.TrimLeft(clean(typ), " "), strings.TrimLeft(clean(data), " ")}
			if strings.ContainsRune(e.Type, ':') {
				e.Type = ""
			}
			events = append(events, e)
			if e.Type != "" {
				stream.WriteString("event: " + e.Type + "\n")
			}
			stream.WriteString("data: " + e.Data + "\n\n")
		}

		rec := httptest.NewRecorder()
		w := newBedrockWriter(rec)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rest := stream.Bytes()
		for _, c := range cuts {
			n := min(int(c), len(rest))
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if _, err := w.Write(rest); err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		if ct := rec.Header().Get("Content-Type"); ct != eventStreamType {
			t.Fatalf("content-type %q", ct)
		}

		var want []sseEvent
		for _, e := range events {
			switch e.Type {
			case "ping":
			case "error":
				kind, msg := anthropicError([]byte(e.Data))
				// The message goes as JSON: invalid UTF-8 comes back
				// as U+FFFD.
				quoted, _ := json.Marshal(msg)
				_ = json.Unmarshal(quoted, &msg)
				name := bedrockException(kind, 0)
				want = append(want, sseEvent{"exception " + strings.ToLower(name[:1]) + name[1:], msg})
			default:
				want = append(want, sseEvent{"chunk", e.Data})
			}
		}
		var got []sseEvent
		dec := eventstream.NewDecoder()
		body := bytes.NewReader(rec.Body.Bytes())
		for {
			m, err := dec.Decode(body, nil)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("frame %d: %v", len(got), err)
			}
			switch kind := m.Headers.Get(":message-type").String(); kind {
			case "event":
				var chunk struct {
					Bytes []byte `json:"bytes"`
				}
				if err := json.Unmarshal(m.Payload, &chunk); err != nil || m.Headers.Get(":event-type").String() != "chunk" {
					t.Fatalf("frame %d: %s %v", len(got), m.Payload, err)
				}
				got = append(got, sseEvent{"chunk", string(chunk.Bytes)})
			case "exception":
				var e struct{ Message string }
				if err := json.Unmarshal(m.Payload, &e); err != nil {
					t.Fatalf("frame %d: %s %v", len(got), m.Payload, err)
				}
				got = append(got, sseEvent{"exception " + m.Headers.Get(":exception-type").String(), e.Message})
			default:
				t.Fatalf("frame %d: message type %q", len(got), kind)
			}
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Fatalf("stream %q cut at %v (-got +want):\n%s", stream.Bytes(), cuts, diff)
		}
	})
}

// FuzzBedrockCountTokensRequest: whatever the CountTokens body, the door
// does not panic, and a body it accepts becomes a JSON object that leads
// with the path's model and holds neither the envelope nor a member that
// count_tokens refuses.
func FuzzBedrockCountTokensRequest(f *testing.F) {
	invoke := `{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	f.Add([]byte(`{"input":{"invokeModel":{"body":"` + base64.StdEncoding.EncodeToString([]byte(invoke)) + `"}}}`))
	f.Add([]byte(`{"input":{"converse":{}}}`))
	f.Add([]byte(`{"input":{"invokeModel":{"body":"e30="}},"x":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, pathModel, berr := bedrockCountDoorRequest(body, "m", false, http.Header{})
		if berr != nil {
			return
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(out, &doc); err != nil || pathModel != "" || !bytes.HasPrefix(out, []byte(`{"model":"m"`)) {
			t.Fatalf("%q became %q (%v)", body, out, err)
		}
		for _, name := range append([]string{"anthropic_version", "anthropic_beta", "stream"}, countDropped[:]...) {
			if _, ok := doc[name]; ok {
				t.Fatalf("%q became %q, with %s", body, out, name)
			}
		}
	})
}
