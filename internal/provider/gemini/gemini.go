// Package gemini is everything the node knows about the Gemini API
// (generativelanguage.googleapis.com and the providers compatible with
// it): the endpoints it forwards (generateContent, streamGenerateContent,
// countTokens, embedContent, batchEmbedContents, and Live sessions:
// BidiGenerateContent over WebSocket, [Live]), where the model is (in
// the path), which body members decide routing and which name the model,
// which headers go up (x-goog-api-key) and come back, how a stream ends
// and fails, where usage is, the error document, what a quota answer
// says, and the model list with its paging. [API] is its catalog entry.
//
// # Paths
//
// Every endpoint is POST /v1beta/models/{model}:{method} or the same under
// /v1, in canonical form only ([Match]): the model is one non-empty path
// segment of unreserved characters, never percent-encoded. The provider
// request goes to {base_url}/models/{provider model}:{method}, so a
// backend's base_url ends before "models"
// (https://generativelanguage.googleapis.com/v1beta). The client's query
// never goes up: it can carry the client's key (?key=). The one exception
// is alt=sse on streamGenerateContent, which selects the SSE framing.
//
// # Streams
//
// With alt=sse a streamGenerateContent answer is `data: {chunk}` events,
// each a GenerateContentResponse, with no [DONE]: the stream is complete
// at the chunk whose candidates carry a finishReason, or whose
// promptFeedback carries a blockReason (a refused prompt gets no
// candidate). A chunk with a top-level "error" is the provider's in-band
// failure, and it is what the node sends when it must cut a stream.
package gemini

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// API is the Gemini API's catalog entry.
var API = &provider.API{
	Protocol:  provider.Gemini,
	Endpoints: []*provider.Spec{GenerateContent, StreamGenerateContent, CountTokens, EmbedContent, BatchEmbedContents, Live},
	Claims:    claims,
	// Google's SDKs send their key as x-goog-api-key, and may send it as
	// ?key= (after the headers).
	KeyHeaders: []string{"X-Goog-Api-Key"},
	QueryKey:   "key",
	// Gemini has no request-id header convention: the node's id is in
	// X-Request-Id, and in every error document as a google.rpc.RequestInfo
	// detail (ErrorBody), where Google's SDKs show error details.
	ErrorBody: ErrorBody,
	NotRouted: notRouted,
	// Google answers carry no rate-limit headers; compatible gateways in
	// front of Gemini send OpenAI-style ones.
	ResponseHeaders:   []string{"X-Ratelimit-"},
	LimitHeaders:      LimitHeaders,
	RetryErrorBody:    RetryErrorBody,
	ProviderRequestID: []string{"X-Request-Id"},
	// Google states its retry advice in the body (google.rpc.RetryInfo).
	RetryAfter:     provider.RetryAfter,
	BodyRetryAfter: retryDelay,
	// No Headroom: Google documents no rate-limit headers for the Gemini
	// API (its quotas show only in a 429's body), so a Gemini backend is
	// balanced on its 429s alone.
	CredentialRefused: credentialRefused,
	QuotaExhausted:    quotaExhausted,
	ModelsPaths:       []string{"/v1beta/models", "/v1/models"},
	ListModels:        listModels,
	GetModel:          getModel,
}

// GenerateContent is POST /v1beta/models/{model}:generateContent.
var GenerateContent = &provider.Spec{
	Endpoint:     provider.GenerateContent,
	Method:       http.MethodPost,
	Match:        matcher("generateContent"),
	UpstreamPath: "/models/{model}:generateContent",
	Inspect:      inspectGenerate,
	Header:       Header,
	BodyUsage:    BodyUsage,
	UsageMember:  usageName,
	BodyOutcome:  BodyOutcome,
	// Gemini names no session in the body.
	SessionHeaders: sessionHeaders,
	Envelopes:      [provider.NumPlatforms]*provider.Envelope{provider.Vertex: vertexGenerate},
	Doors:          []*provider.Door{vertexGenerateDoor},
}

// sessionHeaders are where Gemini clients name a session, none in the
// body. Gemini CLI sends no session id, only its installation id (one per
// user's home), so one user's turns share a backend and its prompt cache;
// the bounded-load spill keeps a busy user from piling onto it.
// opencode's headers come after it.
var sessionHeaders = []string{"X-Gemini-Api-Privileged-User-Id", "X-Session-Affinity", "X-Session-Id"}

// StreamGenerateContent is POST /v1beta/models/{model}:streamGenerateContent.
// With alt=sse the answer is SSE; without it Google streams one JSON array,
// element by element, which the node relays as it arrives.
var StreamGenerateContent = &provider.Spec{
	Endpoint:       provider.StreamGenerateContent,
	Method:         http.MethodPost,
	Match:          matcher("streamGenerateContent"),
	UpstreamPath:   "/models/{model}:streamGenerateContent",
	UpstreamQuery:  streamQuery,
	Inspect:        inspectStream,
	Header:         Header,
	BodyUsage:      BodyUsage,
	UsageMember:    usageName,
	BodyOutcome:    BodyOutcome,
	SessionHeaders: sessionHeaders,
	Stream: &provider.StreamSpec{
		Terminal:    Terminal,
		EndsAtEOF:   true,
		NewTracker:  func(bool) provider.Tracker { return NewStream() },
		NewOutcome:  func() provider.OutcomeTracker { return &StreamOutcome{} },
		InBandError: inBand,
		Keepalive:   []byte(": keepalive\n\n"),
	},
	Envelopes: [provider.NumPlatforms]*provider.Envelope{provider.Vertex: vertexStream},
	Doors:     []*provider.Door{vertexStreamDoor},
}

// CountTokens is POST /v1beta/models/{model}:countTokens. Its answer
// ({"totalTokens":N}) is a count, not token usage.
var CountTokens = &provider.Spec{
	Endpoint:     provider.GeminiCountTokens,
	Method:       http.MethodPost,
	Match:        matcher("countTokens"),
	UpstreamPath: "/models/{model}:countTokens",
	Inspect:      inspectCountTokens,
	Header:       Header,
	BodyUsage:    provider.NoUsage,
	Envelopes:    [provider.NumPlatforms]*provider.Envelope{provider.Vertex: vertexCountTokens},
	Doors:        []*provider.Door{vertexCountTokensDoor},
}

// EmbedContent is POST /v1beta/models/{model}:embedContent.
var EmbedContent = &provider.Spec{
	Endpoint:     provider.EmbedContent,
	Method:       http.MethodPost,
	Match:        matcher("embedContent"),
	UpstreamPath: "/models/{model}:embedContent",
	Inspect:      inspectEmbed,
	Header:       Header,
	BodyUsage:    BodyUsage,
	UsageMember:  usageName,
}

// BatchEmbedContents is POST /v1beta/models/{model}:batchEmbedContents.
var BatchEmbedContents = &provider.Spec{
	Endpoint:     provider.BatchEmbedContents,
	Method:       http.MethodPost,
	Match:        matcher("batchEmbedContents"),
	UpstreamPath: "/models/{model}:batchEmbedContents",
	Inspect:      inspectBatchEmbed,
	Header:       Header,
	BodyUsage:    BodyUsage,
	UsageMember:  usageName,
}

// Versions are the API versions whose paths the node serves, as path
// prefixes.
var versions = [...]string{"/v1beta/models/", "/v1/models/"}

// Match reads the model of a Gemini method path: path is
// /v1beta/models/{model}:{method} or /v1/models/{model}:{method}, exactly,
// with model one non-empty segment of RFC 3986 path characters other than
// "%" (no percent-encoding: the path is matched as it is written), and not
// "." or "..". The model is everything before the last colon, so a model
// may hold colons; method is compared exactly.
func Match(path, method string) (model string, ok bool) {
	for _, p := range versions {
		if !strings.HasPrefix(path, p) {
			continue
		}
		rest := path[len(p):]
		i := strings.LastIndexByte(rest, ':')
		if i <= 0 || rest[i+1:] != method {
			return "", false
		}
		model = rest[:i]
		if model == "." || model == ".." {
			return "", false
		}
		for j := 0; j < len(model); j++ {
			if !segmentByte(model[j]) {
				return "", false
			}
		}
		return model, true
	}
	return "", false
}

func matcher(method string) func(string) (string, bool) {
	return func(path string) (string, bool) { return Match(path, method) }
}

// segmentByte reports whether c may appear unescaped in a path segment
// (RFC 3986 pchar: unreserved, sub-delims, ":" and "@"), "%" excepted.
func segmentByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}

// streamQuery passes alt=sse, and nothing else: the client's query can
// carry its key, and Google's other parameters (alt=json, the default,
// $fields, prettyPrint) change the answer's shape under the node.
func streamQuery(client url.Values) string {
	if alt := client["alt"]; len(alt) == 1 && alt[0] == "sse" {
		return "alt=sse"
	}
	return ""
}

// requestHeaders lists the client headers that may reach the provider.
// X-Goog-Api-Client names the SDK and its version (Google's SDKs always
// send it). Everything else is dropped: the client's key
// (x-goog-api-key, Authorization), X-Goog-User-Project (it names the
// client's Google Cloud project, not ours), cookies, hop-by-hop,
// x-forwarded-*, Accept-Encoding (the transport owns compression), and
// X-Gemini-Api-Privileged-User-Id (Gemini CLI's installation id).
var requestHeaders = [...]string{"Content-Type", "Accept", "User-Agent", "X-Goog-Api-Client"}

// Header builds a Gemini provider request's headers from scratch: the
// allowlisted client headers and `x-goog-api-key: <credential>`.
func Header(client http.Header, credential string) http.Header {
	h := make(http.Header, 5)
	for _, k := range requestHeaders {
		if v := client[k]; len(v) > 0 {
			h[k] = v
		}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	h.Set("X-Goog-Api-Key", credential)
	return h
}

// claims: a request no endpoint serves is a Gemini client's when it
// carries Google's SDK or key headers, a key in the query (?key=, which no
// other API's clients use), or a path only the Gemini API has (/v1beta/,
// the file upload path).
func claims(r *http.Request) bool {
	if r.Header.Get("X-Goog-Api-Key") != "" || r.Header.Get("X-Goog-Api-Client") != "" {
		return true
	}
	p := r.URL.Path
	if strings.HasPrefix(p, "/v1beta/") || p == "/v1beta" || strings.HasPrefix(p, "/upload/v1beta/") {
		return true
	}
	return strings.Contains(r.URL.RawQuery, "key=") && r.URL.Query().Has("key")
}

var (
	errorKey         = provider.NewKey("error")
	finishReasonKey  = provider.NewKey("finishReason")
	blockReasonKey   = provider.NewKey("blockReason")
	candidatesName   = "candidates"
	promptFeedbackNm = "promptFeedback"
)

// Terminal reports whether a stream chunk completes the stream: every
// candidate it carries has a finishReason (a stream of one candidate ends
// with the chunk that says why it stopped), or its promptFeedback has a
// blockReason (a refused prompt, which gets no candidate). A chunk with a
// top-level "error" is the provider's failure report. Chunks of text cost
// a byte search.
func Terminal(ev *sse.Event) (done, failed bool) {
	d := ev.Data
	if len(d) == 0 || d[0] != '{' {
		return false, false
	}
	if provider.MayHaveValue(d, errorKey) && hasMember(d, "error") {
		return false, true
	}
	if provider.MayHaveValue(d, finishReasonKey) && allFinished(d) {
		return true, false
	}
	if provider.MayHaveValue(d, blockReasonKey) {
		if pf, ok, err := jsonedit.Lookup(d, promptFeedbackNm); err == nil && ok && nonNull(pf, "blockReason") {
			return true, false
		}
	}
	return false, false
}

// hasMember reports whether the object d has a non-null top-level member
// key.
func hasMember(d []byte, key string) bool {
	v, ok, err := jsonedit.Lookup(d, key)
	return err == nil && ok && string(v) != "null"
}

// nonNull reports whether obj is an object with a non-null member key.
func nonNull(obj []byte, key string) bool {
	return provider.Object(obj) && hasMember(obj, key)
}

// allFinished reports whether the chunk d has at least one candidate and
// every candidate has a non-null finishReason.
func allFinished(d []byte) bool {
	cands, ok, err := jsonedit.Lookup(d, candidatesName)
	if err != nil || !ok {
		return false
	}
	it, err := jsonedit.Elements(cands)
	if err != nil {
		return false
	}
	n := 0
	for {
		c, _, more, err := it.Next()
		if err != nil {
			return false
		}
		if !more {
			return n > 0
		}
		if !nonNull(c, "finishReason") {
			return false
		}
		n++
	}
}

// inBand is `data: {"error":…}`, the provider's own in-band failure.
func inBand(status int, code, msg, requestID string, _ int) []byte {
	body := ErrorBody(status, code, msg, requestID)
	out := make([]byte, 0, len(body)+8)
	out = append(out, "data: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}
