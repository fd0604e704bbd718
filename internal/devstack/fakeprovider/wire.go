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
	System json.RawMessage `json:"system"`
	// Input is the Responses input (a string or a list of items) or the
	// Embeddings input (a string or a list of strings); Instructions is the
	// Responses system prompt.
	Input        json.RawMessage `json:"input"`
	Instructions string          `json:"instructions"`
	// Prompt is the legacy Completions prompt (a string or a list of
	// strings); the suffix of a fill-in-the-middle request is not read.
	Prompt json.RawMessage `json:"prompt"`
	// Query, Documents and TopN are a rerank request's (documents are
	// strings, or objects with a "text").
	Query     string            `json:"query"`
	Documents []json.RawMessage `json:"documents"`
	TopN      int               `json:"top_n"`
	Messages  []struct {
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

// prompt is the text of the last user message (the last user input item,
// or the input string, for Responses and Embeddings).
func (in wireRequest) prompt() string {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == "user" {
			return contentText(in.Messages[i].Content)
		}
	}
	items := in.inputItems()
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Role == "user" || items[i].Role == "" {
			return contentText(items[i].Content)
		}
	}
	var s string
	if len(in.Input) > 0 && json.Unmarshal(in.Input, &s) == nil {
		return s
	}
	if len(in.Prompt) > 0 {
		return promptText(in.Prompt)
	}
	if in.Query != "" {
		return in.Query
	}
	return ""
}

type inputItem struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// inputItems reads a Responses input list; nil for a string or nothing.
func (in wireRequest) inputItems() []inputItem {
	if len(in.Input) == 0 || in.Input[0] != '[' {
		return nil // chat and messages bodies have no input: no decode
	}
	var items []inputItem
	if json.Unmarshal(in.Input, &items) != nil {
		return nil
	}
	return items
}

// inputs is the number of Embeddings inputs: 1 for a string, the length
// of a list.
func (in wireRequest) inputs() int {
	var list []json.RawMessage
	if json.Unmarshal(in.Input, &list) == nil {
		return len(list)
	}
	return 1
}

// words counts whitespace-separated words in every message and the system
// prompt: the fake's input token count.
func (in wireRequest) words() int {
	n := len(strings.Fields(contentText(in.System))) + len(strings.Fields(in.Instructions)) +
		len(strings.Fields(promptText(in.Prompt))) + len(strings.Fields(in.Query))
	for _, d := range in.Documents {
		n += len(strings.Fields(documentText(d)))
	}
	for _, m := range in.Messages {
		n += len(strings.Fields(contentText(m.Content)))
	}
	if len(in.Input) == 0 {
		return n
	}
	if items := in.inputItems(); items != nil {
		for _, it := range items {
			n += len(strings.Fields(contentText(it.Content)))
		}
	} else {
		var list []string
		if json.Unmarshal(in.Input, &list) == nil {
			for _, s := range list {
				n += len(strings.Fields(s))
			}
		} else {
			n += len(strings.Fields(contentText(in.Input)))
		}
	}
	return n
}

// contentText reads content that is either a string or an array of blocks,
// joining the text of the "text" blocks (Responses: "input_text",
// "output_text") with a space. Anything else is "".
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
		if b.Type == "text" || b.Type == "input_text" || b.Type == "output_text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, " ")
}

// promptText reads a legacy Completions prompt: a string, or a list of
// strings joined with a space. Anything else (token arrays) is "".
func promptText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, " ")
	}
	return ""
}

// documentText reads a rerank document: a string, or an object's "text".
func documentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Text
	}
	return ""
}
