package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Anthropic Messages shapes, as Anthropic's API reference documents them.

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// anthropicUsageOf applies the package doc's formulas: cache reads and writes
// are separate from input_tokens.
func anthropicUsageOf(r reply) anthropicUsage {
	return anthropicUsage{
		InputTokens:              r.words,
		CacheCreationInputTokens: r.b.CacheWriteTokens,
		CacheReadInputTokens:     r.b.CacheReadTokens,
		OutputTokens:             len(r.pieces) + r.b.ReasoningTokens,
	}
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicMsg struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

func anthropicID(seq int64) string { return fmt.Sprintf("msg_fake%06d", seq) }

// anthropicMessage renders a non-stream `message`.
func anthropicMessage(r reply) []byte {
	endTurn := "end_turn"
	return mustJSON(anthropicMsg{
		ID: anthropicID(r.seq), Type: "message", Role: "assistant", Model: r.model,
		Content:    []anthropicBlock{{Type: "text", Text: r.text()}},
		StopReason: &endTurn,
		Usage:      anthropicUsageOf(r),
	})
}

// anthropicStream renders message_start (input and cache usage, output 1),
// content_block_start, ping, one text_delta per piece, content_block_stop,
// message_delta (stop_reason, cumulative output_tokens) and message_stop.
func anthropicStream(r reply) []event {
	type delta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type stopDelta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	type outputUsage struct {
		OutputTokens int `json:"output_tokens"`
	}
	ev := func(name string, v any) event { return event{name: name, data: mustJSON(v)} }

	start := anthropicUsageOf(r)
	start.OutputTokens = 1
	events := []event{
		ev("message_start", struct {
			Type    string       `json:"type"`
			Message anthropicMsg `json:"message"`
		}{"message_start", anthropicMsg{
			ID: anthropicID(r.seq), Type: "message", Role: "assistant", Model: r.model,
			Content: []anthropicBlock{}, Usage: start,
		}}),
		ev("content_block_start", struct {
			Type         string         `json:"type"`
			Index        int            `json:"index"`
			ContentBlock anthropicBlock `json:"content_block"`
		}{"content_block_start", 0, anthropicBlock{Type: "text"}}),
		ev("ping", struct {
			Type string `json:"type"`
		}{"ping"}),
	}
	for _, piece := range r.pieces {
		events = append(events, ev("content_block_delta", struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
			Delta delta  `json:"delta"`
		}{"content_block_delta", 0, delta{"text_delta", piece}}))
	}
	return append(events,
		ev("content_block_stop", struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		}{"content_block_stop", 0}),
		ev("message_delta", struct {
			Type  string      `json:"type"`
			Delta stopDelta   `json:"delta"`
			Usage outputUsage `json:"usage"`
		}{"message_delta", stopDelta{StopReason: "end_turn"}, outputUsage{anthropicUsageOf(r).OutputTokens}}),
		ev("message_stop", struct {
			Type string `json:"type"`
		}{"message_stop"}),
	)
}

// anthropicErrorEvent is the in-band error a stream ends with after a failure
// (the streaming form of a 529).
func anthropicErrorEvent(seq int64) event {
	return event{name: "error", data: anthropicError(errorSpec{status: 529}, seq)}
}

// anthropicErrorType maps a status to Anthropic's error.type (docs/api.md "Status codes").
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// anthropicError renders {"type":"error","error":{"type","message"},"request_id"}.
func anthropicError(e errorSpec, seq int64) []byte {
	status, msg := e.status, e.msg
	switch {
	case e.quota:
		status, msg = http.StatusTooManyRequests, "Your credit balance is too low to access the Anthropic API."
	case status == http.StatusUnauthorized:
		msg = "invalid x-api-key"
	case status == 529:
		msg = "Overloaded"
	case msg == "":
		msg = "fakeprovider: scripted " + http.StatusText(status)
	}
	type body struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	return mustJSON(struct {
		Type      string `json:"type"`
		Error     body   `json:"error"`
		RequestID string `json:"request_id"`
	}{"error", body{anthropicErrorType(status), msg}, fmt.Sprintf("req_fake%06d", seq)})
}

// anthropicModels renders {"data":[…],"has_more":false,"first_id","last_id"}.
func anthropicModels(ids []string, now time.Time) []byte {
	type model struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
	data := make([]model, 0, len(ids))
	for _, id := range ids {
		data = append(data, model{Type: "model", ID: id, DisplayName: id, CreatedAt: now.UTC().Format(time.RFC3339)})
	}
	var first, last json.RawMessage = json.RawMessage("null"), json.RawMessage("null")
	if len(ids) > 0 {
		first, last = mustJSON(ids[0]), mustJSON(ids[len(ids)-1])
	}
	return mustJSON(struct {
		Data    []model         `json:"data"`
		HasMore bool            `json:"has_more"`
		FirstID json.RawMessage `json:"first_id"`
		LastID  json.RawMessage `json:"last_id"`
	}{data, false, first, last})
}
