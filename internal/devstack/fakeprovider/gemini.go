package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Gemini API shapes, as Google's API reference documents them: the model
// is in the path (/v1beta/models/{model}:{method}, or /v1/…), streams are
// SSE only with ?alt=sse (otherwise one JSON array of chunks), and a stream
// has no terminator event: its last chunk carries finishReason.

// geminiRoute maps a Gemini method path to its kind and model.
func geminiRoute(path string) (kind, string, bool) {
	var rest string
	switch {
	case strings.HasPrefix(path, "/v1beta/models/"):
		rest = path[len("/v1beta/models/"):]
	case strings.HasPrefix(path, "/v1/models/"):
		rest = path[len("/v1/models/"):]
	default:
		return kindNone, "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || strings.Contains(rest[:i], "/") {
		return kindNone, "", false
	}
	k := map[string]kind{
		"generateContent": kindGenerate, "streamGenerateContent": kindStreamGenerate,
		"countTokens": kindGeminiCount, "embedContent": kindEmbedContent, "batchEmbedContents": kindBatchEmbed,
	}[rest[i+1:]]
	return k, rest[:i], k != kindNone
}

// geminiContents is what the fake reads of a Gemini body: the contents of
// generateContent (also inside countTokens' generateContentRequest), the
// content of embedContent and the requests of batchEmbedContents.
type geminiContents struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Content           *geminiContent  `json:"content"`
	Request           *struct {
		Contents []geminiContent `json:"contents"`
	} `json:"generateContentRequest"`
	Requests []struct {
		Content geminiContent `json:"content"`
	} `json:"requests"`
}

type geminiContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text string `json:"text"`
	} `json:"parts"`
}

func (c geminiContent) text() string {
	var parts []string
	for _, p := range c.Parts {
		parts = append(parts, p.Text)
	}
	return strings.Join(parts, " ")
}

// parseGemini reads a Gemini body into the fields the fake shares with
// the other protocols: the prompt (the last user content), the words of
// every content, and the number of inputs of a batch.
func parseGemini(body []byte) (prompt string, words, inputs int) {
	var in geminiContents
	if json.Unmarshal(body, &in) != nil {
		return "", 0, 1
	}
	all := in.Contents
	if in.Request != nil {
		all = append(all, in.Request.Contents...)
	}
	if in.Content != nil {
		all = append(all, *in.Content)
	}
	for _, r := range in.Requests {
		all = append(all, r.Content)
	}
	if in.SystemInstruction != nil {
		words += len(strings.Fields(in.SystemInstruction.text()))
	}
	for _, c := range all {
		words += len(strings.Fields(c.text()))
		if c.Role == "user" || c.Role == "" {
			prompt = c.text()
		}
	}
	return prompt, words, max(len(in.Requests), 1)
}

type geminiUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount,omitempty"`
	CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount,omitempty"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

// geminiUsageOf applies the package doc's formulas: the prompt count
// includes the cached tokens, thoughts are apart from the candidates.
func geminiUsageOf(r reply, final bool) geminiUsage {
	u := geminiUsage{PromptTokenCount: r.words + r.b.CacheReadTokens, CachedContentTokenCount: r.b.CacheReadTokens}
	if final {
		u.CandidatesTokenCount, u.ThoughtsTokenCount = len(r.pieces), r.b.ReasoningTokens
	}
	u.TotalTokenCount = u.PromptTokenCount + u.CandidatesTokenCount + u.ThoughtsTokenCount
	return u
}

type geminiCandidate struct {
	Content      geminiContent `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata geminiUsage       `json:"usageMetadata"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

// geminiChunk is one chunk of the answer: text, and on the last one the
// finish reason and the whole usage.
func geminiChunk(r reply, text string, final bool) geminiResponse {
	c := geminiCandidate{Content: geminiContent{Role: "model"}}
	c.Content.Parts = append(c.Content.Parts, struct {
		Text string `json:"text"`
	}{text})
	if final {
		c.FinishReason = "STOP"
	}
	return geminiResponse{
		Candidates: []geminiCandidate{c}, UsageMetadata: geminiUsageOf(r, final),
		ModelVersion: r.model, ResponseID: fmt.Sprintf("resp_fake%06d", r.seq),
	}
}

// geminiBody renders a non-stream answer of kind k.
func geminiBody(k kind, r reply) []byte {
	switch k {
	case kindGeminiCount:
		return mustJSON(struct {
			TotalTokens int `json:"totalTokens"`
		}{r.words})
	case kindEmbedContent:
		return mustJSON(struct {
			Embedding geminiEmbedding `json:"embedding"`
		}{vector(0)})
	case kindBatchEmbed:
		out := make([]geminiEmbedding, r.inputs)
		for i := range out {
			out[i] = vector(i)
		}
		return mustJSON(struct {
			Embeddings []geminiEmbedding `json:"embeddings"`
		}{out})
	case kindStreamGenerate: // without alt=sse: the chunks as one JSON array
		chunks := make([]geminiResponse, 0, len(r.pieces))
		for i, p := range r.pieces {
			chunks = append(chunks, geminiChunk(r, p, i == len(r.pieces)-1))
		}
		return mustJSON(chunks)
	}
	return mustJSON(geminiChunk(r, r.text(), true))
}

type geminiEmbedding struct {
	Values []float64 `json:"values"`
}

func vector(i int) geminiEmbedding {
	v := make([]float64, 8)
	for j := range v {
		v[j] = float64(i+j+1) / 10
	}
	return geminiEmbedding{Values: v}
}

// geminiStream renders the SSE chunks of a stream (alt=sse): one per
// piece, the last with finishReason and the whole usage.
func geminiStream(r reply) []event {
	events := make([]event, 0, len(r.pieces))
	for i, p := range r.pieces {
		events = append(events, event{data: mustJSON(geminiChunk(r, p, i == len(r.pieces)-1))})
	}
	return events
}

// geminiErrorEvent is the in-band error a stream ends with after a
// failure.
func geminiErrorEvent() event {
	return event{data: geminiError(errorSpec{status: http.StatusServiceUnavailable, msg: "The model is overloaded. Please try again later."})}
}

// geminiStatus is the google.rpc.Code name of an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// geminiError renders {"error":{"code","message","status","details"}}. A
// quota answer is the daily quota's 429, with its QuotaFailure and
// RetryInfo details.
func geminiError(e errorSpec) []byte {
	status, msg := e.status, e.msg
	var details []any
	switch {
	case e.quota:
		status = http.StatusTooManyRequests
		msg = "You exceeded your current quota, please check your plan and billing details."
		details = []any{
			map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]string{
				"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
				"quotaId":     "GenerateRequestsPerDayPerProjectPerModel",
			}}},
			map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "36s"},
		}
	case status == http.StatusUnauthorized:
		msg = "API key not valid. Please pass a valid API key."
	case msg == "":
		msg = "fakeprovider: scripted " + http.StatusText(status)
	}
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []any  `json:"details,omitempty"`
	}
	return mustJSON(struct {
		Error body `json:"error"`
	}{body{status, msg, geminiStatus(status), details}})
}

// geminiModels renders {"models":[…]} (one page: the fake has few).
func geminiModels(ids []string) []byte {
	type model struct {
		Name                       string   `json:"name"`
		DisplayName                string   `json:"displayName"`
		SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	}
	out := make([]model, 0, len(ids))
	for _, id := range ids {
		out = append(out, model{"models/" + id, id, []string{"generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"}})
	}
	return mustJSON(struct {
		Models []model `json:"models"`
	}{out})
}
