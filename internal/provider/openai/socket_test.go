package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSocketStreamError: a stream's in-band error event goes out on the
// Responses WebSocket in the socket's error shape, as OpenAI's WebSocket
// mode sends errors: "type":"error", the HTTP status, an error object with
// type, code, message and param, and the retry-relevant headers. Codex
// acts on an error event only when it carries a status; the stream's own
// shape has none, and Codex then waited for its stream idle timeout.
func TestSocketStreamError(t *testing.T) {
	header := http.Header{"X-Request-Id": {"sg-1"}, "X-Provider-Request-Id": {"req_9"}, "Content-Type": {"text/event-stream"}}
	tests := []struct {
		name string
		data string
		want string
	}{
		{
			name: "the node's cut at the end of a drain",
			data: string(responsesInBandData(503, "node_shutting_down", "the node is shutting down; the answer is incomplete", 3)),
			want: `{"type":"error","status":503,"error":{"message":"the node is shutting down; the answer is incomplete","type":"server_error","param":null,"code":"node_shutting_down"},"headers":{"x-provider-request-id":"req_9","x-request-id":"sg-1"}}`,
		},
		{
			name: "the node's cut of a failed provider stream",
			data: string(responsesInBandData(502, "", "the provider stream ended without its terminator", 7)),
			want: `{"type":"error","status":502,"error":{"message":"the provider stream ended without its terminator","type":"server_error","param":null,"code":"server_error"},"headers":{"x-provider-request-id":"req_9","x-request-id":"sg-1"}}`,
		},
		{
			name: "the provider's own rate limit",
			data: `{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":2}`,
			want: `{"type":"error","status":429,"error":{"message":"slow down","type":"rate_limit_exceeded","param":null,"code":"rate_limit_exceeded"},"headers":{"x-provider-request-id":"req_9","x-request-id":"sg-1"}}`,
		},
		{
			name: "an error object inside",
			data: `{"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"too long","param":"input"}}`,
			want: `{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"too long","param":"input"},"headers":{"x-provider-request-id":"req_9","x-request-id":"sg-1"}}`,
		},
		{
			name: "not JSON",
			data: `oops`,
			want: `{"type":"error","status":502,"error":{"message":"the stream failed","type":"server_error","param":null,"code":null},"headers":{"x-provider-request-id":"req_9","x-request-id":"sg-1"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := socketStreamError([]byte(tt.data), header)
			if diff := cmp.Diff(string(got), tt.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
			// What Codex reads of it: a type "error" with a status.
			var ev struct {
				Type   string `json:"type"`
				Status *int   `json:"status"`
			}
			if err := json.Unmarshal(got, &ev); err != nil || ev.Type != "error" || ev.Status == nil {
				t.Errorf("not an error event with a status: %s (%v)", got, err)
			}
		})
	}
}

// responsesInBandData is the data of the Responses stream's in-band error
// event, as the relay writes it.
func responsesInBandData(status int, code, msg string, n int) []byte {
	ev := responsesInBand(status, code, msg, "", n)
	const prefix = "event: error\ndata: "
	return ev[len(prefix) : len(ev)-2]
}

// TestSocketLimitReached: the event that ends a socket at the end of its
// lifetime is OpenAI's for its own WebSocket connection limit, which
// Codex answers by opening a new socket.
func TestSocketLimitReached(t *testing.T) {
	got := socketLimitReached(http.Header{"X-Request-Id": {"sg-2"}})
	want := `{"type":"error","status":400,"error":{"message":"Responses websocket connection limit reached. Create a new websocket connection to continue.","type":"invalid_request_error","param":null,"code":"websocket_connection_limit_reached"},"headers":{"x-request-id":"sg-2"}}`
	if diff := cmp.Diff(string(got), want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// TestSocketContinue: a frame that names the socket's last answer as its
// previous_response_id is sent with that answer's input and output items
// before its own input, each byte for byte as it was written, and
// previous_response_id null; any other frame goes as it is
// (socketRemember keeps the items, socketContinue expands).
func TestSocketContinue(t *testing.T) {
	tests := []struct {
		name, body, done, next, want string
	}{
		{
			name: "string input, then array",
			body: `{"model":"m","input":"hi","stream":true}`,
			done: `{"type":"response.completed","sequence_number":3,"response":{"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}],"usage":{"input_tokens":1}}}`,
			next: `{"model":"m","previous_response_id":"resp_1","input":[{"type":"message","role":"user","content":"next"}],"stream":true}`,
			want: `{"model":"m","previous_response_id":null,"input":[{"type":"message","role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]},{"type":"message","role":"user","content":"next"}],"stream":true}`,
		},
		{
			name: "array input with spaces, then string; type last",
			body: `{"model":"m","input":[ {"type":"message", "role":"user","content":"a<b & c"} ],"stream":true}`,
			done: `{"response":{"output":[ {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"} ],"id":"resp_2"},"type":"response.completed"}`,
			next: `{"model":"m","previous_response_id":"resp_2","input":"more","stream":true}`,
			want: `{"model":"m","previous_response_id":null,"input":[{"type":"message", "role":"user","content":"a<b & c"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"message","role":"user","content":"more"}],"stream":true}`,
		},
		{
			name: "no items at all",
			body: `{"model":"m","stream":true}`,
			done: `{"type":"response.completed","response":{"id":"resp_3","output":[]}}`,
			next: `{"model":"m","previous_response_id":"resp_3","stream":true}`,
			want: `{"model":"m","previous_response_id":null,"stream":true,"input":null}`,
		},
		{
			name: "the last answer failed",
			body: `{"model":"m","input":"hi"}`,
			done: `{"type":"response.failed","response":{"id":"resp_4","output":[]}}`,
			next: `{"previous_response_id":"resp_4","input":"x"}`,
			want: `{"previous_response_id":"resp_4","input":"x"}`,
		},
		{
			name: "an id that is no string",
			body: `{"model":"m","input":"hi"}`,
			done: `{"type":"response.completed","response":{"id":7,"output":[]}}`,
			next: `{"previous_response_id":7,"input":"x"}`,
			want: `{"previous_response_id":7,"input":"x"}`,
		},
		{
			name: "an input that is no list",
			body: `{"model":"m","input":{"a":1}}`,
			done: `{"type":"response.completed","response":{"id":"resp_6","output":[]}}`,
			next: `{"previous_response_id":"resp_6","input":"x"}`,
			want: `{"previous_response_id":"resp_6","input":"x"}`,
		},
		{
			name: "another answer named",
			body: `{"model":"m","input":"hi"}`,
			done: `{"type":"response.completed","response":{"id":"resp_7","output":[]}}`,
			next: `{"previous_response_id":"resp_other","input":"x"}`,
			want: `{"previous_response_id":"resp_other","input":"x"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := socketContinue([]byte(tt.next), socketRemember([]byte(tt.body), []byte(tt.done)))
			if diff := cmp.Diff(string(got), tt.want); diff != "" {
				t.Errorf("request (-got +want):\n%s", diff)
			}
		})
	}
}

// TestSocketPrepare: a warm-up frame is answered with an empty response
// whose id is made of the request id, and leaves its input for the next
// frame that names that id.
func TestSocketPrepare(t *testing.T) {
	if _, _, ok := socketPrepare([]byte(`{"model":"m","input":"hi"}`), "sg-1"); ok {
		t.Fatal("a frame without generate: false was taken for a warm-up")
	}
	events, last, ok := socketPrepare([]byte(`{"model":"m","generate":false,"input":[{"type":"message","role":"user","content":"ctx"}]}`), "sg-1")
	if !ok || len(events) != 2 {
		t.Fatalf("ok %v, %d events", ok, len(events))
	}
	want := `{"type":"response.completed","sequence_number":1,"response":{"id":"resp_sg-1","object":"response","status":"completed","model":"m","output":[],"usage":{"input_tokens":0,"input_tokens_details":{"cached_tokens":0},"output_tokens":0,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":0}}}`
	if diff := cmp.Diff(string(events[1]), want); diff != "" {
		t.Errorf("completed (-got +want):\n%s", diff)
	}
	got := socketContinue([]byte(`{"model":"m","previous_response_id":"resp_sg-1","input":"now"}`), last)
	if want := `{"model":"m","previous_response_id":null,"input":[{"type":"message","role":"user","content":"ctx"},{"type":"message","role":"user","content":"now"}]}`; string(got) != want {
		t.Errorf("next request %s, want %s", got, want)
	}
}

// BenchmarkSocketContinue is what a socket adds to a turn that builds on
// the answer before it, as Codex's turns do after the first: keeping
// that answer's items and expanding the next frame with them, here for a
// conversation of 40 items (a string input each turn, a message and a
// function call out).
func BenchmarkSocketContinue(b *testing.B) {
	var items []string
	for i := range 20 {
		items = append(items,
			fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"turn %d: please look at the file and tell me what it does"}]}`, i),
			fmt.Sprintf(`{"type":"function_call","call_id":"call_%d","name":"shell","arguments":"{\"command\":[\"cat\",\"main.go\"]}"}`, i))
	}
	body := []byte(`{"model":"m","instructions":"be brief","input":[` + strings.Join(items, ",") + `],"stream":true}`)
	done := []byte(`{"type":"response.completed","sequence_number":40,"response":{"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"It prints hello."}]}],"usage":{"input_tokens":900,"output_tokens":5}}}`)
	next := []byte(`{"model":"m","instructions":"be brief","previous_response_id":"resp_1","input":[{"type":"message","role":"user","content":"and now?"}],"stream":true}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		last := socketRemember(body, done)
		if out := socketContinue(next, last); len(out) <= len(body) {
			b.Fatalf("not expanded: %s", out)
		}
	}
}
