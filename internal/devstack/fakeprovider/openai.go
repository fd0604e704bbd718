package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// OpenAI Chat Completions shapes, as OpenAI's API reference documents them.

type openAIUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// openAIUsageOf applies the package doc's formulas: cached tokens are a
// subset of prompt_tokens, reasoning tokens a subset of completion_tokens.
func openAIUsageOf(r reply) openAIUsage {
	var u openAIUsage
	u.PromptTokens = r.words + r.b.CacheReadTokens
	u.CompletionTokens = len(r.pieces) + r.b.ReasoningTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = r.b.CacheReadTokens
	u.CompletionTokensDetails.ReasoningTokens = r.b.ReasoningTokens
	return u
}

func openAIID(seq int64) string { return fmt.Sprintf("chatcmpl-fake%06d", seq) }

// openAICompletion renders a non-stream `chat.completion`.
func openAICompletion(r reply) []byte {
	type message struct {
		Role    string          `json:"role"`
		Content string          `json:"content"`
		Refusal json.RawMessage `json:"refusal"` // null
	}
	type choice struct {
		Index        int             `json:"index"`
		Message      message         `json:"message"`
		Logprobs     json.RawMessage `json:"logprobs"` // null
		FinishReason string          `json:"finish_reason"`
	}
	return mustJSON(struct {
		ID      string      `json:"id"`
		Object  string      `json:"object"`
		Created int64       `json:"created"`
		Model   string      `json:"model"`
		Choices []choice    `json:"choices"`
		Usage   openAIUsage `json:"usage"`
	}{
		ID:      openAIID(r.seq),
		Object:  "chat.completion",
		Created: r.created.Unix(),
		Model:   r.model,
		Choices: []choice{{Message: message{Role: "assistant", Content: r.text()}, FinishReason: "stop"}},
		Usage:   openAIUsageOf(r),
	})
}

// openAIStream renders the `chat.completion.chunk` events: a role chunk, one
// chunk per piece, a finish_reason chunk, the usage chunk when include_usage
// was asked for (earlier chunks then carry "usage": null), and [DONE].
func openAIStream(r reply) []event {
	type delta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	type choice struct {
		Index        int             `json:"index"`
		Delta        delta           `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"` // null
		FinishReason *string         `json:"finish_reason"`
	}
	type chunk struct {
		ID      string          `json:"id"`
		Object  string          `json:"object"`
		Created int64           `json:"created"`
		Model   string          `json:"model"`
		Choices []choice        `json:"choices"`
		Usage   json.RawMessage `json:"usage,omitempty"`
	}
	var null json.RawMessage // usage is absent unless include_usage
	if r.includeUsage {
		null = json.RawMessage("null")
	}
	mk := func(c []choice, usage json.RawMessage) event {
		return event{data: mustJSON(chunk{
			ID: openAIID(r.seq), Object: "chat.completion.chunk", Created: r.created.Unix(),
			Model: r.model, Choices: c, Usage: usage,
		})}
	}

	empty, stop := "", "stop"
	events := []event{mk([]choice{{Delta: delta{Role: "assistant", Content: &empty}}}, null)}
	for _, piece := range r.pieces {
		events = append(events, mk([]choice{{Delta: delta{Content: &piece}}}, null))
	}
	events = append(events, mk([]choice{{FinishReason: &stop}}, null))
	if r.includeUsage {
		events = append(events, mk([]choice{}, mustJSON(openAIUsageOf(r))))
	}
	return append(events, event{data: []byte("[DONE]")})
}

// textCompletion renders a non-stream legacy `text_completion`: one
// choice with the reply as its text, and the Chat Completions usage.
func textCompletion(r reply) []byte {
	return mustJSON(struct {
		ID      string         `json:"id"`
		Object  string         `json:"object"`
		Created int64          `json:"created"`
		Model   string         `json:"model"`
		Choices []legacyChoice `json:"choices"`
		Usage   openAIUsage    `json:"usage"`
	}{
		ID:      fmt.Sprintf("cmpl-fake%06d", r.seq),
		Object:  "text_completion",
		Created: r.created.Unix(),
		Model:   r.model,
		Choices: []legacyChoice{{Text: r.text(), Logprobs: json.RawMessage("null"), FinishReason: new("stop")}},
		Usage:   openAIUsageOf(r),
	})
}

// legacyChoice is a choice of a legacy Completions answer or chunk.
type legacyChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     json.RawMessage `json:"logprobs"` // null
	FinishReason *string         `json:"finish_reason"`
}

// textCompletionStream renders a legacy Completions stream: one chunk per
// piece, a chunk with finish_reason "stop", the usage chunk (no choices)
// when include_usage was asked for, and [DONE].
func textCompletionStream(r reply) []event {
	type chunk struct {
		ID      string          `json:"id"`
		Object  string          `json:"object"`
		Created int64           `json:"created"`
		Model   string          `json:"model"`
		Choices []legacyChoice  `json:"choices"`
		Usage   json.RawMessage `json:"usage,omitempty"`
	}
	var null json.RawMessage
	if r.includeUsage {
		null = json.RawMessage("null")
	}
	mk := func(c []legacyChoice, usage json.RawMessage) event {
		return event{data: mustJSON(chunk{
			ID: fmt.Sprintf("cmpl-fake%06d", r.seq), Object: "text_completion", Created: r.created.Unix(),
			Model: r.model, Choices: c, Usage: usage,
		})}
	}
	nullLogprobs := json.RawMessage("null")
	var events []event
	for _, piece := range r.pieces {
		events = append(events, mk([]legacyChoice{{Text: piece, Logprobs: nullLogprobs}}, null))
	}
	events = append(events, mk([]legacyChoice{{Logprobs: nullLogprobs, FinishReason: new("stop")}}, null))
	if r.includeUsage {
		events = append(events, mk([]legacyChoice{}, mustJSON(openAIUsageOf(r))))
	}
	return append(events, event{data: []byte("[DONE]")})
}

// openAIErrorEvent is the in-band error a stream ends with after a failure.
func openAIErrorEvent() event {
	return event{data: openAIError(errorSpec{status: http.StatusInternalServerError, msg: "The server had an error while processing your request."})}
}

// openAIError renders {"error":{"message","type","param","code"}}.
func openAIError(e errorSpec) []byte {
	typ, code, msg := "invalid_request_error", "", e.msg
	switch {
	case e.quota:
		typ, code = "insufficient_quota", "insufficient_quota"
		msg = "You exceeded your current quota, please check your plan and billing details."
	case e.status == http.StatusUnauthorized:
		code = "invalid_api_key"
		msg = "Incorrect API key provided."
	case e.status == http.StatusNotFound && msg == "":
		code = "model_not_found"
	case e.status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case e.status >= 500:
		typ = "server_error"
	}
	if msg == "" {
		msg = "fakeprovider: scripted " + http.StatusText(e.status)
	}
	type body struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"` // null
		Code    *string         `json:"code"`
	}
	b := body{Message: msg, Type: typ}
	if code != "" {
		b.Code = &code
	}
	return mustJSON(struct {
		Error body `json:"error"`
	}{b})
}

// openAIModels renders {"object":"list","data":[…]}.
func openAIModels(ids []string, now time.Time) []byte {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := make([]model, 0, len(ids))
	for _, id := range ids {
		data = append(data, model{ID: id, Object: "model", Created: now.Unix(), OwnedBy: "fakeprovider"})
	}
	return mustJSON(struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", data})
}
