// Package converse is everything the node knows about Amazon Bedrock's
// Converse API (docs/api.md "Bedrock Converse"), the protocol
// bedrock_converse: Bedrock Runtime's own conversation API, which only
// Bedrock serves, so its backends are always on platform bedrock and
// nothing is converted. [API] is its catalog entry.
//
// # Paths
//
// A client (the AWS SDKs' Bedrock Runtime Converse and ConverseStream)
// sends
//
//	POST /model/{modelId}/converse
//	POST /model/{modelId}/converse-stream
//
// with the public model as {modelId}, percent-encoded as the AWS SDKs
// encode it (":" as %3A, the "/" of an inference-profile ARN as %2F): the
// one segment the node decodes, exactly once; a doubly encoded id is
// refused. The body has no model member and is sent unchanged to
// {base_url}/model/{provider model}/converse (or /converse-stream), the
// provider model escaped the same way, signed (SigV4, service bedrock)
// or with the backend's Bedrock API key as a bearer token.
//
// # Streams
//
// Bedrock answers a stream in AWS event-stream framing: messageStart,
// contentBlockStart, contentBlockDelta, contentBlockStop, messageStop and
// metadata events, and exceptions (throttlingException,
// modelStreamErrorException, …) as messages of type exception. The
// envelope re-frames each message as one SSE event, "event: {type}" and
// its payload as data, which the request path relays; the client's
// writer frames each event back as the event-stream message it was
// (payload bytes unchanged, checksums by the AWS SDK's codec). Usage is
// in the metadata event; an exception is the stream's failure, and is
// what the node sends when it must cut one.
package converse

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
)

// API is the Bedrock Converse API's catalog entry.
var API = &provider.API{
	Protocol:  provider.BedrockConverse,
	Endpoints: []*provider.Spec{Converse, ConverseStream},
	// A request no endpoint serves under /model/ is a Bedrock Runtime
	// client's: it gets Bedrock's error shape.
	Claims: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/model/") },
	// The AWS SDKs send a Bedrock API key as Authorization: Bearer
	// (AWS_BEARER_TOKEN_BEDROCK), which every API reads: no header of
	// its own.
	RequestIDHeader:   "X-Amzn-Requestid",
	ErrorBody:         func(_ int, _, msg, _ string) []byte { return ErrorBody(msg) },
	NotRouted:         func(string) (string, string, bool) { return "", "", false },
	ResponseHeaders:   []string{"X-Amzn-Errortype"},
	ProviderRequestID: []string{"X-Amzn-Requestid"},
	RetryAfter:        provider.RetryAfter,
	QuotaExhausted:    quotaExhausted,
	ListModels:        listModels,
	GetModel:          getModel,
}

// Converse is POST /model/{modelId}/converse.
var Converse = &provider.Spec{
	Endpoint:     provider.Converse,
	Method:       http.MethodPost,
	UpstreamPath: "/model/{model}/converse",
	Inspect:      inspectConverse,
	Header:       Header,
	BodyUsage:    BodyUsage,
	UsageMember:  "usage",
	BodyOutcome:  bodyOutcome,
	Envelopes:    [provider.NumPlatforms]*provider.Envelope{provider.Bedrock: envelope("/converse")},
	Doors:        []*provider.Door{door("converse", false)},
}

// ConverseStream is POST /model/{modelId}/converse-stream.
var ConverseStream = &provider.Spec{
	Endpoint:     provider.ConverseStream,
	Method:       http.MethodPost,
	UpstreamPath: "/model/{model}/converse-stream",
	Inspect:      inspectConverseStream,
	Header:       Header,
	BodyUsage:    BodyUsage,
	UsageMember:  "usage",
	BodyOutcome:  bodyOutcome,
	Stream: &provider.StreamSpec{
		Terminal:    Terminal,
		EndsAtEOF:   true,
		NewTracker:  func(bool) provider.Tracker { return &Stream{} },
		NewOutcome:  func() provider.OutcomeTracker { return &streamOutcome{} },
		InBandError: inBand,
		Keepalive:   []byte(": keepalive\n\n"),
		Types:       []string{"contentBlockDelta", "contentBlockStart", "contentBlockStop", "messageStart", "messageStop", "metadata"},
	},
	Envelopes: [provider.NumPlatforms]*provider.Envelope{provider.Bedrock: envelope("/converse-stream")},
	Doors:     []*provider.Door{door("converse-stream", true)},
}

// SigningName is Bedrock Runtime's SigV4 service name.
const SigningName = "bedrock"

// envelope is an endpoint on Bedrock, whose own API it is: the URL names
// the model, the body goes unchanged.
func envelope(op string) *provider.Envelope {
	return &provider.Envelope{
		URL:         func(base *url.URL, model string, _ bool) (*url.URL, error) { return modelURL(base, model, op) },
		Body:        body,
		Header:      func(http.Header, string) {}, // Header did it all
		Answer:      answer,
		SigningName: SigningName,
	}
}

// ModelPath returns the escaped path segment of a Bedrock model id, as
// the AWS SDKs write it: every byte but ASCII letters, digits and "-._~"
// percent-encoded, so that an inference-profile ARN stays one segment.
func ModelPath(model string) string { return httpbinding.EscapePath(model, true) }

// modelURL is {base}/model/{modelId}{op}; Path holds the id unescaped,
// RawPath as sent.
func modelURL(base *url.URL, model, op string) (*url.URL, error) {
	if model == "" {
		return nil, errors.New("converse: empty bedrock model id")
	}
	u := *base
	u.Path = base.Path + "/model/" + model + op
	u.RawPath = base.EscapedPath() + "/model/" + ModelPath(model) + op
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	return &u, nil
}

// body is the client's body, unchanged: Converse names the model only in
// the path.
func body(r *provider.Request, b []byte, _ http.Header, dst *provider.Pieces) error {
	r.Split(b, nil, nil, false, dst)
	return nil
}

var requestHeaders = [...]string{"Content-Type", "User-Agent"}

// Header builds a Converse provider request's headers from scratch: the
// allowlisted client headers and, for a static credential (a Bedrock API
// key), Authorization: Bearer. An aws credential signs the request
// afterwards instead.
func Header(client http.Header, credential string) http.Header {
	h := make(http.Header, 3)
	for _, k := range requestHeaders {
		if v := client[k]; len(v) > 0 {
			h[k] = v
		}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	if credential != "" {
		h.Set("Authorization", "Bearer "+credential)
	}
	return h
}

// eventStreamType is the media type of an AWS event stream.
const eventStreamType = "application/vnd.amazon.eventstream"

// answer re-frames a Bedrock event stream as SSE; a whole answer and an
// error document (Bedrock's own shape, this protocol's) pass unchanged.
func answer(resp *http.Response, body io.Reader) io.Reader {
	if resp.StatusCode/100 != 2 {
		return body
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != eventStreamType {
		return body
	}
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return newEventStream(body)
}

// Terminal: messageStop ends the answer and metadata (its usage) may
// follow it, so the stream may end after either; an exception is the
// provider's failure report.
func Terminal(ev *sse.Event) (done, failed bool) {
	switch {
	case ev.Type == "messageStop" || ev.Type == "metadata":
		return true, false
	case isException(ev.Type):
		return false, true
	}
	return false, false
}

// isException reports whether an event type names an exception
// (throttlingException, modelStreamErrorException…): no event of the
// protocol ends so.
func isException(typ string) bool { return strings.HasSuffix(typ, "Exception") }

// inBand is the exception that ends a stream the node cuts, named as
// Bedrock names the exception of the same status.
func inBand(status int, _, msg, _ string, _ int) []byte {
	name := Exception(status)
	name = strings.ToLower(name[:1]) + name[1:] // stream exceptions are lower camel case
	out := make([]byte, 0, len(msg)+len(name)+32)
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, ErrorBody(msg)...)
	return append(out, "\n\n"...)
}

// ErrorBody is Bedrock's error document, {"message": msg}; its kind goes
// in the x-amzn-ErrorType header ([Exception]).
func ErrorBody(msg string) []byte {
	b, err := json.Marshal(struct {
		Message string `json:"message"`
	}{msg})
	if err != nil { // unreachable: a string always marshals
		return []byte(`{"message":"internal error"}`)
	}
	return b
}

// Exception names the Bedrock Runtime exception of an error status, as
// x-amzn-ErrorType carries it.
func Exception(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "UnrecognizedClientException"
	case http.StatusForbidden:
		return "AccessDeniedException"
	case http.StatusNotFound:
		return "ResourceNotFoundException"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "ModelTimeoutException"
	case http.StatusTooManyRequests:
		return "ThrottlingException"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableException"
	}
	if status/100 == 4 {
		return "ValidationException"
	}
	return "InternalServerException"
}

// quotaExhausted: Bedrock has no balance to run out of (a used-up quota
// is ServiceQuotaExceededException, a limit like a rate limit); only a
// 402, which no provider sends for anything else.
func quotaExhausted(status int, _ []byte) bool { return status == http.StatusPaymentRequired }

// listModels renders the models a key may use as Bedrock lists
// foundation models ({"modelSummaries":[{"modelId":…}]}). Bedrock Runtime
// has no model list of its own, so no path serves it; it is what a
// Converse client would be shown.
func listModels(names []string, _ url.Values, _ time.Time) ([]byte, *provider.BodyError) {
	type summary struct {
		ModelID string `json:"modelId"`
	}
	doc := struct {
		ModelSummaries []summary `json:"modelSummaries"`
	}{ModelSummaries: make([]summary, 0, len(names))}
	for _, n := range names {
		doc.ModelSummaries = append(doc.ModelSummaries, summary{n})
	}
	b, err := json.Marshal(doc)
	if err != nil { // unreachable: strings only
		return nil, provider.Problemf("internal_error", "model list: %v", err)
	}
	return b, nil
}

func getModel(name string, _ time.Time) []byte {
	b, _ := json.Marshal(struct {
		ModelDetails struct {
			ModelID string `json:"modelId"`
		} `json:"modelDetails"`
	}{ModelDetails: struct {
		ModelID string `json:"modelId"`
	}{name}})
	return b
}
