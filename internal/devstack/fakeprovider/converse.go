package fakeprovider

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Amazon Bedrock's Converse API, as Bedrock Runtime serves it:
// POST /model/{modelId}/converse and /converse-stream, authorized as the
// invoke paths are (SigV4 for service bedrock, or a Bedrock API key as
// Bearer). The body is {"messages":[{"role","content":[{"text"}]}],
// "system":[{"text"}], "inferenceConfig", "toolConfig", …} without a
// model; an answer is {"output":{"message":…},"stopReason","usage",
// "metrics"}; a stream is AWS event-stream messages (messageStart,
// contentBlockDelta per piece, contentBlockStop, messageStop, metadata
// with the usage), encoded with the AWS SDK's codec; errors as on the
// invoke paths.

// BedrockConverse is Bedrock's Converse API (converse.go).
const BedrockConverse Protocol = "bedrock_converse"

// converseRoute reads /model/{modelId}/converse[-stream]; the model id is
// the decoded segment.
func converseRoute(path string) (model string, stream, ok bool) {
	rest, ok := strings.CutPrefix(path, "/model/")
	if !ok {
		return "", false, false
	}
	switch {
	case strings.HasSuffix(rest, "/converse-stream"):
		return strings.TrimSuffix(rest, "/converse-stream"), true, true
	case strings.HasSuffix(rest, "/converse"):
		return strings.TrimSuffix(rest, "/converse"), false, true
	}
	return "", false, false
}

// converseRequest is what the fake reads of a Converse body.
type converseRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"messages"`
	System []struct {
		Text string `json:"text"`
	} `json:"system"`
	Model   *json.RawMessage `json:"model"`
	ModelID *json.RawMessage `json:"modelId"`
}

// prompt is the last user message's text; words counts every word of the
// messages and the system prompt, the fake's input token count.
func (c converseRequest) prompt() string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" {
			var parts []string
			for _, b := range c.Messages[i].Content {
				parts = append(parts, b.Text)
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

func (c converseRequest) words() int {
	n := 0
	for _, s := range c.System {
		n += len(strings.Fields(s.Text))
	}
	for _, m := range c.Messages {
		for _, b := range m.Content {
			n += len(strings.Fields(b.Text))
		}
	}
	return n
}

// converseUsage is Converse's usage object: inputTokens excludes the
// cache reads and writes, which totalTokens includes.
type converseUsage struct {
	InputTokens           int `json:"inputTokens"`
	OutputTokens          int `json:"outputTokens"`
	TotalTokens           int `json:"totalTokens"`
	CacheReadInputTokens  int `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens int `json:"cacheWriteInputTokens,omitempty"`
}

func converseUsageOf(r reply) converseUsage {
	u := converseUsage{
		InputTokens: r.words, OutputTokens: len(r.pieces) + r.b.ReasoningTokens,
		CacheReadInputTokens: r.b.CacheReadTokens, CacheWriteInputTokens: r.b.CacheWriteTokens,
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	return u
}

type converseText struct {
	Text string `json:"text"`
}

// converseAnswer is a whole Converse answer.
type converseAnswer struct {
	Output     converseOutput `json:"output"`
	StopReason string         `json:"stopReason"`
	Usage      converseUsage  `json:"usage"`
	Metrics    map[string]int `json:"metrics"`
}

type converseOutput struct {
	Message converseMessage `json:"message"`
}

type converseMessage struct {
	Role    string         `json:"role"`
	Content []converseText `json:"content"`
}

// serveConverse answers one Converse request.
func (p *Provider) serveConverse(w http.ResponseWriter, r *http.Request, body []byte, model string, stream bool) {
	var in converseRequest
	parseErr := json.Unmarshal(body, &in)
	req := p.record(Request{
		Protocol: BedrockConverse, Method: r.Method, Path: r.URL.Path, Header: r.Header, Body: body,
		Model: model, Stream: stream, Prompt: in.prompt(),
	})
	fail := bedrockFail(w, req.Seq)
	if !p.bedrockAdmit(r, body, fail) {
		return
	}
	switch {
	case parseErr != nil:
		fail(http.StatusBadRequest, "ValidationException", "Malformed input request, please reformat your input and try again.")
		return
	case in.Model != nil || in.ModelID != nil:
		fail(http.StatusBadRequest, "ValidationException", "Malformed input request: extraneous key [model] is not permitted, please reformat your input and try again.")
		return
	case len(in.Messages) == 0:
		fail(http.StatusBadRequest, "ValidationException", "A conversation must start with a user message.")
		return
	}
	b, echo, ok := p.bedrockScripted(r, req, fail)
	if !ok {
		return
	}
	ctx := r.Context()
	rp := reply{seq: req.Seq, model: model, created: p.o.Clock(), pieces: split("echo: "+echo, b.Chunks), words: in.words(), b: b, stream: stream}
	w.Header().Set("X-Amzn-Requestid", bedrockRequestID(req.Seq))
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mustJSON(converseAnswer{
			Output:     converseOutput{Message: converseMessage{Role: "assistant", Content: []converseText{{rp.text()}}}},
			StopReason: "end_turn", Usage: converseUsageOf(rp), Metrics: map[string]int{"latencyMs": 1},
		}))
		return
	}
	p.converseStream(ctx, w, b, converseEvents(rp))
}

// converseEvents renders a reply as ConverseStream's events.
func converseEvents(r reply) []event {
	ev := func(name string, v any) event { return event{name: name, data: mustJSON(v)} }
	type delta struct {
		ContentBlockIndex int          `json:"contentBlockIndex"`
		Delta             converseText `json:"delta"`
	}
	events := []event{ev("messageStart", struct {
		Role string `json:"role"`
	}{"assistant"})}
	for _, piece := range r.pieces {
		events = append(events, ev("contentBlockDelta", delta{0, converseText{piece}}))
	}
	return append(events,
		ev("contentBlockStop", struct {
			ContentBlockIndex int `json:"contentBlockIndex"`
		}{0}),
		ev("messageStop", struct {
			StopReason string `json:"stopReason"`
		}{"end_turn"}),
		ev("metadata", struct {
			Usage   converseUsage  `json:"usage"`
			Metrics map[string]int `json:"metrics"`
		}{converseUsageOf(r), map[string]int{"latencyMs": 1}}),
	)
}

// converseStream writes events as event-stream messages of their type,
// flushed one by one, applying b's EventDelay, Cut and ErrorEvent (an
// exception message: BedrockException, or modelStreamErrorException).
func (p *Provider) converseStream(ctx context.Context, w http.ResponseWriter, b Behaviour, events []event) {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	rc := http.NewResponseController(w)
	enc := eventstream.NewEncoder()
	fault := -1
	switch {
	case b.Cut:
		fault = min(b.CutAfter, len(events)-1)
	case b.ErrorEvent:
		fault = min(b.ErrorAfter, len(events)-1)
	}
	for i, ev := range events {
		if i > 0 && !wait(ctx, b.EventDelay) {
			return
		}
		var m eventstream.Message
		if i == fault {
			if b.Cut {
				resetConn(w)
				return
			}
			name := orDefault(b.BedrockException, "modelStreamErrorException")
			m.Headers.Set(":message-type", eventstream.StringValue("exception"))
			m.Headers.Set(":exception-type", eventstream.StringValue(name))
			m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
			m.Payload = mustJSON(struct {
				Message string `json:"message"`
			}{orDefault(b.ErrorMessage, "fakeprovider: scripted "+name)})
			_ = enc.Encode(w, m)
			_ = rc.Flush()
			return
		}
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
		m.Headers.Set(":event-type", eventstream.StringValue(ev.name))
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		m.Payload = ev.data
		if err := enc.Encode(w, m); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
