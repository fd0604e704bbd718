package fakeprovider

import (
	"encoding/json"
	"strings"
)

// wireRequest holds the request fields the fake reads; both protocols share
// it (system is Anthropic's, stream_options OpenAI's).
type wireRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// parseBody decodes a request body; an empty body (GET) is not an error.
func parseBody(body []byte) (wireRequest, error) {
	var in wireRequest
	if len(body) == 0 {
		return in, nil
	}
	err := json.Unmarshal(body, &in)
	return in, err
}

// prompt is the text of the last user message.
func (in wireRequest) prompt() string {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == "user" {
			return contentText(in.Messages[i].Content)
		}
	}
	return ""
}

// words counts whitespace-separated words in every message and the system
// prompt: the fake's input token count.
func (in wireRequest) words() int {
	n := len(strings.Fields(contentText(in.System)))
	for _, m := range in.Messages {
		n += len(strings.Fields(contentText(m.Content)))
	}
	return n
}

// contentText reads content that is either a string or an array of blocks,
// joining the text of the "text" blocks with a space. Anything else is "".
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, " ")
}
