package fakeprovider

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
)

// Endpoints beyond chat completions and messages: OpenAI Responses (with
// compaction and input token counts) and Embeddings, Anthropic
// count_tokens, in the shapes the APIs' references
// document.

// responsesUsage is a Responses usage object: the same numbers as Chat
// Completions under the Responses names.
type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func responsesUsageOf(r reply) *responsesUsage {
	o := openAIUsageOf(r)
	u := &responsesUsage{InputTokens: o.PromptTokens, OutputTokens: o.CompletionTokens, TotalTokens: o.TotalTokens}
	u.InputTokensDetails.CachedTokens = o.PromptTokensDetails.CachedTokens
	u.OutputTokensDetails.ReasoningTokens = o.CompletionTokensDetails.ReasoningTokens
	return u
}

type responsesText struct {
	Type        string   `json:"type"`
	Text        string   `json:"text"`
	Annotations []string `json:"annotations"`
}

type responsesItem struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Status  string          `json:"status"`
	Role    string          `json:"role"`
	Content []responsesText `json:"content"`
}

type responsesObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Error             json.RawMessage `json:"error"`              // null
	IncompleteDetails json.RawMessage `json:"incomplete_details"` // null
	Model             string          `json:"model"`
	Output            []responsesItem `json:"output"`
	ParallelToolCalls bool            `json:"parallel_tool_calls"`
	Store             bool            `json:"store"`
	Tools             []string        `json:"tools"`
	Usage             *responsesUsage `json:"usage"` // null until completed
}

var jsonNull = json.RawMessage("null")

func responsesIDs(seq int64) (resp, item string) {
	return fmt.Sprintf("resp_fake%06d", seq), fmt.Sprintf("msg_fake%06d", seq)
}

// responsesOf renders the response object in a status; output and usage
// only once completed.
func responsesOf(r reply, status string) responsesObject {
	id, item := responsesIDs(r.seq)
	o := responsesObject{
		ID: id, Object: "response", CreatedAt: r.created.Unix(), Status: status,
		Error: jsonNull, IncompleteDetails: jsonNull, Model: r.model,
		Output: []responsesItem{}, ParallelToolCalls: true, Tools: []string{},
	}
	if status == "completed" {
		o.Output = []responsesItem{{ID: item, Type: "message", Status: "completed", Role: "assistant",
			Content: []responsesText{{Type: "output_text", Text: r.text(), Annotations: []string{}}}}}
		o.Usage = responsesUsageOf(r)
	}
	return o
}

// responsesBody renders a non-stream response.
func responsesBody(r reply) []byte { return mustJSON(responsesOf(r, "completed")) }

// responsesStream renders the event sequence of a Responses stream with one
// message: response.created, response.in_progress, output_item.added,
// content_part.added, one output_text.delta per piece, output_text.done,
// content_part.done, output_item.done, response.completed (with usage).
// Every event is named and says its type and sequence_number in its data;
// there is no [DONE].
func responsesStream(r reply) []event {
	_, itemID := responsesIDs(r.seq)
	var events []event
	add := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = len(events)
		events = append(events, event{name: typ, data: mustJSON(fields)})
	}
	inProgress := responsesItem{ID: itemID, Type: "message", Status: "in_progress", Role: "assistant", Content: []responsesText{}}
	done := responsesOf(r, "completed").Output[0]
	part := responsesText{Type: "output_text", Text: "", Annotations: []string{}}

	add("response.created", map[string]any{"response": responsesOf(r, "in_progress")})
	add("response.in_progress", map[string]any{"response": responsesOf(r, "in_progress")})
	add("response.output_item.added", map[string]any{"output_index": 0, "item": inProgress})
	add("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
	for _, piece := range r.pieces {
		add("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []string{}})
	}
	add("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": r.text(), "logprobs": []string{}})
	add("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": done.Content[0]})
	add("response.output_item.done", map[string]any{"output_index": 0, "item": done})
	add("response.completed", map[string]any{"response": responsesOf(r, "completed")})
	return events
}

// responsesErrorEvent is the Responses stream's own error event.
func responsesErrorEvent() event {
	return event{name: "error", data: mustJSON(map[string]any{
		"type": "error", "code": "server_error", "message": "The server had an error while processing your request.",
		"param": nil, "sequence_number": 0,
	})}
}

// embeddingsBody renders an embeddings list: one 8-dimension vector per
// input, derived from its position; usage counts the input words.
func embeddingsBody(r reply, inputs int) []byte {
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	data := make([]item, max(inputs, 1))
	for i := range data {
		vec := make([]float64, 8)
		for j := range vec {
			vec[j] = math.Round(math.Sin(float64(i*8+j+1))*1e6) / 1e6
		}
		data[i] = item{Object: "embedding", Index: i, Embedding: vec}
	}
	return mustJSON(struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: data, Model: r.model, Usage: struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}{r.words, r.words}})
}

// countTokensBody renders {"input_tokens":N}: the words of the request.
func countTokensBody(r reply) []byte {
	return mustJSON(struct {
		InputTokens int `json:"input_tokens"`
	}{r.words})
}

// compactBody renders a compaction, as POST /v1/responses/compact answers:
// {"id","object":"response.compaction","created_at","output":[…],"usage"}
// with the request's prompt as the one user message kept, followed by a
// compaction item, and a Responses usage object.
func compactBody(r reply) []byte {
	type item struct {
		ID               string          `json:"id"`
		Type             string          `json:"type"`
		Role             string          `json:"role,omitempty"`
		Status           string          `json:"status,omitempty"`
		Content          []responsesText `json:"content,omitempty"`
		EncryptedContent string          `json:"encrypted_content,omitempty"`
	}
	id, msg := responsesIDs(r.seq)
	return mustJSON(struct {
		ID        string          `json:"id"`
		Object    string          `json:"object"`
		CreatedAt int64           `json:"created_at"`
		Output    []item          `json:"output"`
		Usage     *responsesUsage `json:"usage"`
	}{
		ID: id, Object: "response.compaction", CreatedAt: r.created.Unix(),
		Output: []item{
			{ID: msg, Type: "message", Role: "user", Status: "completed",
				Content: []responsesText{{Type: "input_text", Text: r.text(), Annotations: []string{}}}},
			{ID: fmt.Sprintf("cmp_fake%06d", r.seq), Type: "compaction", EncryptedContent: "fake"},
		},
		Usage: responsesUsageOf(r),
	})
}

// inputTokensBody renders POST /v1/responses/input_tokens's answer:
// {"object":"response.input_tokens","input_tokens":N}, N the words of the
// request.
func inputTokensBody(r reply) []byte {
	return mustJSON(struct {
		Object      string `json:"object"`
		InputTokens int    `json:"input_tokens"`
	}{"response.input_tokens", r.words})
}

// kind is what a path asks for.
type kind int

const (
	kindNone kind = iota
	kindChat
	kindMessages
	kindResponses
	kindEmbeddings
	kindCountTokens
	kindModels
	kindGenerate
	kindStreamGenerate
	kindGeminiCount
	kindEmbedContent
	kindBatchEmbed
	kindCompact
	kindInputTokens
	kindCompletions
	kindRerank
	kindSpeech
	kindTranscribe
	kindTranslate
	kindImageGen
	kindImageEdit
)

// route maps a request path to its protocol, method and kind.
func route(r *http.Request) (Protocol, string, kind) {
	switch r.URL.Path {
	case "/v1/chat/completions":
		return OpenAI, http.MethodPost, kindChat
	case "/v1/responses":
		return OpenAI, http.MethodPost, kindResponses
	case "/v1/embeddings":
		return OpenAI, http.MethodPost, kindEmbeddings
	case "/v1/responses/compact":
		return OpenAI, http.MethodPost, kindCompact
	case "/v1/responses/input_tokens":
		return OpenAI, http.MethodPost, kindInputTokens
	case "/v1/completions":
		return OpenAI, http.MethodPost, kindCompletions
	case "/v1/rerank", "/v2/rerank":
		return OpenAI, http.MethodPost, kindRerank
	case "/v1/audio/speech":
		return OpenAI, http.MethodPost, kindSpeech
	case "/v1/audio/transcriptions":
		return OpenAI, http.MethodPost, kindTranscribe
	case "/v1/audio/translations":
		return OpenAI, http.MethodPost, kindTranslate
	case "/v1/images/generations":
		return OpenAI, http.MethodPost, kindImageGen
	case "/v1/images/edits":
		return OpenAI, http.MethodPost, kindImageEdit
	case "/v1/messages":
		return Anthropic, http.MethodPost, kindMessages
	case "/v1/messages/count_tokens":
		return Anthropic, http.MethodPost, kindCountTokens
	case "/v1/models":
		if r.Header.Get("anthropic-version") != "" {
			return Anthropic, http.MethodGet, kindModels
		}
		return OpenAI, http.MethodGet, kindModels
	case "/v1beta/models":
		return Gemini, http.MethodGet, kindModels
	}
	if k, _, ok := geminiRoute(r.URL.Path); ok {
		return Gemini, http.MethodPost, k
	}
	return "", http.MethodPost, kindNone
}

// rerankBody renders a rerank answer: every document scored, the highest
// first (a document's score falls with its position), top_n of them when
// set. /v1/rerank reports usage as Jina and vLLM do (usage.total_tokens =
// words of the query and documents); /v2/rerank as Cohere does
// (meta.billed_units with search_units 1 and input_tokens).
func rerankBody(r reply, path string) []byte {
	type result struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
	}
	n := r.documents
	if r.topN > 0 && r.topN < n {
		n = r.topN
	}
	results := make([]result, n)
	for i := range results {
		results[i] = result{Index: i, RelevanceScore: math.Round(1e6/float64(i+2)) / 1e6}
	}
	if path == "/v2/rerank" {
		type billed struct {
			SearchUnits int `json:"search_units"`
			InputTokens int `json:"input_tokens"`
		}
		type meta struct {
			BilledUnits billed `json:"billed_units"`
		}
		return mustJSON(struct {
			ID      string   `json:"id"`
			Results []result `json:"results"`
			Meta    meta     `json:"meta"`
		}{fmt.Sprintf("rerank-fake%06d", r.seq), results, meta{billed{1, r.words}}})
	}
	type usage struct {
		TotalTokens int `json:"total_tokens"`
	}
	return mustJSON(struct {
		ID      string   `json:"id"`
		Model   string   `json:"model"`
		Results []result `json:"results"`
		Usage   usage    `json:"usage"`
	}{fmt.Sprintf("rerank-fake%06d", r.seq), r.model, results, usage{r.words}})
}
