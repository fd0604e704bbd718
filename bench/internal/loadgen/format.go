package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/scootgate/scootgate/internal/sse"
)

// Errors of a stream that answered 200 but was not a complete stream of
// its API (see [Format]).
var (
	ErrNoTerminator = errors.New("loadgen: stream ended without its terminator")
	ErrNoUsage      = errors.New("loadgen: stream carried no usage")
)

// Format says what a complete stream of one API looks like: which event
// ends it and which carries its usage. [Stream] fails a shot whose last
// event is not the terminator (a cut stream, or events after the
// terminator) with ErrNoTerminator, and one without usage with ErrNoUsage.
// The zero Format accepts any stream with at least one event.
type Format struct {
	// Name names the API in errors.
	Name string
	// Terminal reports whether ev ends the stream.
	Terminal func(ev sse.Event) bool
	// Usage reports whether ev carries the stream's token usage.
	Usage func(ev sse.Event) bool
}

// The stream formats of the three APIs the node serves (docs/api.md).
var (
	// ChatCompletions: data-only events; usage in the chunk with a
	// "usage" object (asked for with stream_options.include_usage); the
	// terminator is data: [DONE].
	ChatCompletions = Format{
		Name:     "chat completions",
		Terminal: func(ev sse.Event) bool { return ev.Type == "" && string(ev.Data) == "[DONE]" },
		Usage: func(ev sse.Event) bool {
			if ev.Type != "" || !bytes.Contains(ev.Data, []byte(`"usage":{`)) {
				return false // earlier chunks carry "usage": null, or nothing
			}
			var c struct {
				Usage *struct {
					Prompt     *int `json:"prompt_tokens"`
					Completion *int `json:"completion_tokens"`
				} `json:"usage"`
			}
			return json.Unmarshal(ev.Data, &c) == nil && c.Usage != nil && c.Usage.Prompt != nil && c.Usage.Completion != nil
		},
	}
	// Messages (Anthropic): named events from message_start to
	// message_stop; the final usage is message_delta's.
	Messages = Format{
		Name:     "messages",
		Terminal: func(ev sse.Event) bool { return ev.Type == "message_stop" },
		Usage: func(ev sse.Event) bool {
			if ev.Type != "message_delta" {
				return false
			}
			var d struct {
				Usage *struct {
					Output *int `json:"output_tokens"`
				} `json:"usage"`
			}
			return json.Unmarshal(ev.Data, &d) == nil && d.Usage != nil && d.Usage.Output != nil
		},
	}
	// Responses (OpenAI): named events from response.created to
	// response.completed (or incomplete, failed), no [DONE]; usage is in
	// the final event's response object.
	Responses = Format{
		Name: "responses",
		Terminal: func(ev sse.Event) bool {
			switch ev.Type {
			case "response.completed", "response.incomplete", "response.failed":
				return true
			}
			return false
		},
		Usage: func(ev sse.Event) bool {
			if ev.Type != "response.completed" && ev.Type != "response.incomplete" {
				return false
			}
			var d struct {
				Response struct {
					Usage *struct {
						Input  *int `json:"input_tokens"`
						Output *int `json:"output_tokens"`
					} `json:"usage"`
				} `json:"response"`
			}
			if json.Unmarshal(ev.Data, &d) != nil || d.Response.Usage == nil {
				return false
			}
			return d.Response.Usage.Input != nil && d.Response.Usage.Output != nil
		},
	}
)

// streamCheck follows one stream's events against a Format.
type streamCheck struct {
	f            Format
	usage, ended bool // ended: the last event was the terminator
}

// see accounts one event; keepalive comments change nothing.
func (c *streamCheck) see(ev sse.Event) {
	if ev.Comment {
		return
	}
	c.ended = c.f.Terminal != nil && c.f.Terminal(ev)
	if !c.usage && c.f.Usage != nil {
		c.usage = c.f.Usage(ev)
	}
}

// err is the stream's verdict once it has ended cleanly.
func (c *streamCheck) err() error {
	switch {
	case c.f.Terminal != nil && !c.ended:
		return ErrNoTerminator
	case c.f.Usage != nil && !c.usage:
		return ErrNoUsage
	}
	return nil
}
