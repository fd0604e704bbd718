package loadgen

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
)

// errBroken stands for a transport error in TestFormats's table.
var errBroken = errors.New("a read error")

// TestFormats reads streams of every API as the fake provider writes them
// (the wire the node relays), and the same streams broken: cut before the
// terminator, without usage, with an event after the terminator.
func TestFormats(t *testing.T) {
	prov := fakeprovider.New(fakeprovider.Options{})
	base, err := prov.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Close()
	const pieces = 5
	words := strings.TrimSpace(strings.Repeat("w ", 20))
	chat := func(extra string) Request {
		return Request{URL: base + "/chat/completions", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(
			`{"model":"m","stream":true` + extra + `,"messages":[{"role":"user","content":"[[chunks=5]] ` + words + `"}]}`)}
	}
	messages := func(directive string) Request {
		return Request{URL: base + "/messages", Header: http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}, Body: []byte(
			`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"[[chunks=5]] ` + directive + words + `"}]}`)}
	}
	responses := func(directive string) Request {
		return Request{URL: base + "/responses", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(
			`{"model":"m","stream":true,"input":"[[chunks=5]] ` + directive + words + `"}`)}
	}
	usage := `,"stream_options":{"include_usage":true}`
	tests := []struct {
		name       string
		req        Request
		f          Format
		wantEvents int
		wantErr    error
	}{
		// role, pieces, finish, usage, [DONE]
		{"chat completions", chat(usage), ChatCompletions, pieces + 4, nil},
		{"chat completions without usage", chat(""), ChatCompletions, pieces + 3, ErrNoUsage},
		// message_start, content_block_start, ping, pieces, content_block_stop, message_delta, message_stop
		{"messages", messages(""), Messages, pieces + 6, nil},
		{"messages ended by an error event", messages("[[error_event=after:4]] "), Messages, 5, ErrNoTerminator},
		{"messages cut", messages("[[cut=after_events:4]] "), Messages, 4, errBroken},
		// created, in_progress, output_item.added, content_part.added, pieces, output_text.done, content_part.done, output_item.done, completed
		{"responses", responses(""), Responses, pieces + 8, nil},
		{"responses cut", responses("[[cut=after_events:12]] "), Responses, 12, errBroken},
		{"responses ended by an error event", responses("[[error_event=after:6]] "), Responses, 7, ErrNoTerminator},
		// The wrong format for a stream: no [DONE] in a Responses stream.
		{"responses read as chat completions", responses(""), ChatCompletions, pieces + 8, ErrNoTerminator},
		{"any stream with the zero format", responses(""), Format{}, pieces + 8, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Shot{Intended: time.Now()}
			Stream(http.DefaultClient, tt.req, tt.f)(context.Background(), &s)
			switch {
			case tt.wantErr == errBroken:
				// A connection cut mid-stream is a read error already.
				if s.Err == nil || errors.Is(s.Err, ErrNoTerminator) {
					t.Fatalf("err = %v, want the read error", s.Err)
				}
			case !errors.Is(s.Err, tt.wantErr):
				t.Fatalf("err = %v, want %v", s.Err, tt.wantErr)
			}
			if s.Events != tt.wantEvents {
				t.Errorf("%d events, want %d", s.Events, tt.wantEvents)
			}
		})
	}
}

// TestStreamCheck covers what the fake provider does not write: events
// after the terminator, keepalives, usage that is null or lacks its
// numbers.
func TestStreamCheck(t *testing.T) {
	const (
		done      = "data: [DONE]\n\n"
		chatUsage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n"
		stop      = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	)
	tests := []struct {
		name    string
		f       Format
		events  []string
		wantErr error
	}{
		{"chat: keepalive after the terminator", ChatCompletions, []string{chatUsage, done, ": keepalive\n\n"}, nil},
		{"chat: an event after the terminator", ChatCompletions, []string{chatUsage, done, "data: {}\n\n"}, ErrNoTerminator},
		{"chat: usage null", ChatCompletions, []string{"data: {\"choices\":[],\"usage\":null}\n\n", done}, ErrNoUsage},
		{"chat: usage without its numbers", ChatCompletions, []string{"data: {\"usage\":{\"total_tokens\":5}}\n\n", done}, ErrNoUsage},
		{"chat: [DONE] with an event name is not the terminator", ChatCompletions, []string{chatUsage, "event: x\ndata: [DONE]\n\n"}, ErrNoTerminator},
		{"messages: usage in message_delta", Messages, []string{"event: message_delta\ndata: {\"usage\":{\"output_tokens\":4}}\n\n", stop}, nil},
		{"messages: message_delta without usage", Messages, []string{"event: message_delta\ndata: {\"delta\":{}}\n\n", stop}, ErrNoUsage},
		{"messages: usage only in message_start", Messages, []string{"event: message_start\ndata: {\"message\":{\"usage\":{\"output_tokens\":1}}}\n\n", stop}, ErrNoUsage},
		{"responses: incomplete ends it", Responses, []string{"event: response.incomplete\ndata: {\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n"}, nil},
		{"responses: completed with usage null", Responses, []string{"event: response.completed\ndata: {\"response\":{\"usage\":null}}\n\n"}, ErrNoUsage},
		{"responses: failed ends it, without usage", Responses, []string{"event: response.failed\ndata: {\"response\":{}}\n\n"}, ErrNoUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sseServer(t, http.StatusOK, tt.events...)
			s := Shot{Intended: time.Now()}
			Stream(srv.Client(), Request{URL: srv.URL}, tt.f)(context.Background(), &s)
			if !errors.Is(s.Err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", s.Err, tt.wantErr)
			}
			if s.Events != len(tt.events) {
				t.Errorf("%d events, want %d", s.Events, len(tt.events))
			}
		})
	}
}
