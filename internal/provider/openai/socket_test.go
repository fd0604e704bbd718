package openai

import (
	"encoding/json"
	"net/http"
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
