package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// The Bedrock door (docs/api.md "Cloud client paths"): what Bedrock
// Runtime's own clients (the AWS SDKs' InvokeModel, Claude Code in its
// Bedrock mode) send, served by any Messages target. The request
//
//	POST /model/{modelId}/invoke
//	POST /model/{modelId}/invoke-with-response-stream
//
// carries the public model in the path (percent-encoded as the AWS SDKs
// encode it) and a Messages body without "model" and "stream", with
// "anthropic_version" (bedrock-2023-05-31, or the Anthropic API version
// that the Anthropic SDKs' Bedrock clients send) and, optionally,
// "anthropic_beta". At the entrance the body gains the model (and
// "stream": true on the streaming path), loses the version member, and its
// betas become anthropic-beta headers: it is then a Messages request like
// any other. A whole answer is Anthropic's message document, as Bedrock's
// is; a stream goes back in AWS event-stream framing, one chunk per
// Messages stream event, its bytes unchanged; an error goes back as
// Bedrock's {"message": …} with its exception name in x-amzn-ErrorType.

// BedrockInvokeDoor is Messages through Bedrock Runtime's invoke paths.
var BedrockInvokeDoor = &provider.Door{
	Platform:   provider.Bedrock,
	Match:      matchBedrockInvoke,
	Request:    bedrockDoorRequest,
	Writer:     func(w http.ResponseWriter) provider.DoorWriter { return newBedrockWriter(w) },
	MissingKey: bedrockMissingKey,
}

// bedrockMissingKey tells a Bedrock client without a usable key how to
// send one: as a Bedrock API key (what AWS_BEARER_TOKEN_BEDROCK makes the
// AWS SDKs and Claude Code send). A SigV4 signature is named as such: the
// node holds no AWS secret to verify it against.
func bedrockMissingKey(h http.Header) string {
	const send = "send the gateway key as a Bedrock API key, Authorization: Bearer <key> (AWS_BEARER_TOKEN_BEDROCK)"
	if strings.HasPrefix(strings.TrimLeft(h.Get("Authorization"), " \t"), "AWS4-") {
		return "this gateway does not accept AWS SigV4 signatures: " + send
	}
	return "missing API key: " + send
}

// BedrockModelSegment reads a Bedrock Runtime path as sent
// ([provider.BedrockModelSegment]).
func BedrockModelSegment(escapedPath string) (model, op string, ok bool, err *provider.BodyError) {
	return provider.BedrockModelSegment(escapedPath)
}

func matchBedrockInvoke(escapedPath string) (model string, stream, ok bool, err *provider.BodyError) {
	model, op, ok, err := BedrockModelSegment(escapedPath)
	switch {
	case !ok:
		return "", false, false, nil
	case op == "invoke":
		return model, false, true, err
	case op == "invoke-with-response-stream":
		return model, true, true, err
	}
	return "", false, false, nil
}

// bedrockDoorNames are the members the door reads: the envelope's, and
// the ones its path stands for, which the body must not name.
var bedrockDoorNames = provider.NewNames("anthropic_version", "anthropic_beta", "model", "stream")

// bedrockDoorRequest is the Messages request of a Bedrock-shaped one.
func bedrockDoorRequest(body []byte, model string, stream bool, h http.Header) ([]byte, string, *provider.BodyError) {
	if berr := refuseGuardrail(h); berr != nil {
		return nil, "", berr
	}
	return fromEnvelope(body, model, stream, h, bedrockDoorNames, BedrockVersion)
}

// refuseGuardrail refuses a request that asks for a Bedrock guardrail
// (X-Amzn-Bedrock-GuardrailIdentifier): the node cannot apply one, and
// serving the request without it would drop a safety control the client
// asked for.
func refuseGuardrail(h http.Header) *provider.BodyError {
	if h.Get("X-Amzn-Bedrock-Guardrailidentifier") == "" {
		return nil
	}
	return &provider.BodyError{Code: "invalid_request", Msg: "Bedrock guardrails (X-Amzn-Bedrock-GuardrailIdentifier) are not applied through this gateway; send the request without one"}
}

// fromEnvelope makes a Messages body of one that a cloud platform's
// clients send (Bedrock's, Vertex's): the model (and stream) that the path
// names become members, the version member goes, and so does
// "anthropic_beta", whose betas join the anthropic-beta headers. The
// version member is the platform's version, or an Anthropic API version
// (YYYY-MM-DD: what the Anthropic SDKs' platform clients put there, the
// version their requests are written for), which becomes the
// anthropic-version header unless the client sent one. names lists
// "anthropic_version", "anthropic_beta", "model", "stream", in this order.
// Every other member keeps its bytes and order.
func fromEnvelope(body []byte, model string, stream bool, h http.Header, names *provider.Names, version string) ([]byte, string, *provider.BodyError) {
	var vals [4][]byte
	f := provider.Found{Vals: vals[:]}
	berr, err := provider.Scan(body, "", names, &f)
	switch {
	case err != nil:
		return nil, "", &provider.BodyError{Code: "invalid_json", Msg: "request body is not a JSON object: " + err.Error()}
	case berr != nil:
		return nil, "", berr
	case f.Vals[0] == nil:
		return nil, "", &provider.BodyError{Code: "invalid_request", Msg: "anthropic_version is required: " + strconv.Quote(version)}
	case f.Vals[2] != nil:
		return nil, "", &provider.BodyError{Code: "invalid_request", Msg: "model is named by the path; the body must not name it"}
	case f.Vals[3] != nil:
		return nil, "", &provider.BodyError{Code: "invalid_request", Msg: "stream is decided by the path; the body must not name it"}
	}
	if berr := takeEnvelope(f.Vals[0], f.Vals[1], h, version); berr != nil {
		return nil, "", berr
	}
	quoted, _ := json.Marshal(model) // a string always marshals
	out := make([]byte, 0, len(body)+len(quoted)+24)
	out = append(out, `{"model":`...)
	out = append(out, quoted...)
	if stream {
		out = append(out, `,"stream":true`...)
	}
	it, _ := jsonedit.Members(body) // Scan has validated body
	for {
		m, ok, _ := it.Next()
		if !ok {
			break
		}
		if m.KeyIs("anthropic_version") || m.KeyIs("anthropic_beta") {
			continue
		}
		out = append(out, ",\""...)
		out = append(out, m.RawKey...)
		out = append(out, "\":"...)
		out = append(out, m.Value...)
	}
	out = append(out, '}')
	return out, "", nil
}

// takeEnvelope reads a platform envelope's members: version, the
// version member's value, must be the platform's version or an Anthropic
// API version (YYYY-MM-DD: what the Anthropic SDKs' platform clients put
// there), which becomes the anthropic-version header unless the client
// sent one; betas, the "anthropic_beta" member's value (nil when absent),
// join the anthropic-beta headers.
func takeEnvelope(version, betas []byte, h http.Header, platformVersion string) *provider.BodyError {
	var asked string
	if json.Unmarshal(version, &asked) != nil || asked != platformVersion && !apiVersion(asked) {
		return &provider.BodyError{Code: "invalid_request", Msg: "anthropic_version must be " + strconv.Quote(platformVersion) + " or an Anthropic API version (YYYY-MM-DD)"}
	}
	if asked != platformVersion && h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", asked)
	}
	if betas == nil {
		return nil
	}
	var list []string
	if json.Unmarshal(betas, &list) != nil {
		return &provider.BodyError{Code: "invalid_request", Msg: "anthropic_beta must be an array of strings"}
	}
	for _, b := range list {
		if b == "" || strings.ContainsAny(b, ",\r\n") {
			return &provider.BodyError{Code: "invalid_request", Msg: "anthropic_beta holds an invalid beta name"}
		}
		h.Add("Anthropic-Beta", b)
	}
	return nil
}

// bedrockExceptions names the Bedrock Runtime exception a Bedrock client
// expects for an Anthropic error type (the reverse of bedrockErrorTypes),
// by status where the type does not decide.
var bedrockExceptions = errorNames{
	byType: map[string]string{
		"invalid_request_error": "ValidationException",
		"authentication_error":  "UnrecognizedClientException",
		"permission_error":      "AccessDeniedException",
		"not_found_error":       "ResourceNotFoundException",
		"request_too_large":     "ValidationException",
		"rate_limit_error":      "ThrottlingException",
		"timeout_error":         "ModelTimeoutException",
		"overloaded_error":      "ServiceUnavailableException",
		"api_error":             "InternalServerException",
	},
	throttled: "ThrottlingException", unavailable: "ServiceUnavailableException",
	invalid: "ValidationException", internal: "InternalServerException",
}

// bedrockException names the exception of an Anthropic error type and
// status.
func bedrockException(kind string, status int) string { return bedrockExceptions.name(kind, status) }

// errorNames names a cloud platform's error for an Anthropic error type,
// by HTTP status where the type does not decide: the platform's own
// names for a 429, a 503, another 4xx and anything else.
type errorNames struct {
	byType                                    map[string]string
	throttled, unavailable, invalid, internal string
}

func (n errorNames) name(kind string, status int) string {
	if name, ok := n.byType[kind]; ok {
		return name
	}
	switch {
	case status == http.StatusTooManyRequests:
		return n.throttled
	case status == http.StatusServiceUnavailable:
		return n.unavailable
	case status/100 == 4:
		return n.invalid
	}
	return n.internal
}

// anthropicError reads an Anthropic error document: its type and message
// ("" and the whole body when it is not one).
func anthropicError(doc []byte) (kind, msg string) {
	var e errorBody
	if json.Unmarshal(doc, &e) != nil || e.Error.Message == "" {
		return "", strings.TrimSpace(string(doc))
	}
	return e.Error.Type, e.Error.Message
}

// maxDoorError bounds an error document (or a count) held back to rewrite.
const maxDoorError = 64 << 10

// bedrockWriter is the Bedrock doors' response writer: an error answer
// is held back and rewritten as Bedrock's; an SSE answer is written as an
// AWS event stream, event by event; a count_tokens answer (count) is held
// back and written as CountTokens'; any other answer passes unchanged.
type bedrockWriter struct {
	w      http.ResponseWriter
	count  bool // the answer is count_tokens': held back and written as CountTokens'
	status int
	mode   uint8        // what the answer is, decided at WriteHeader
	held   bytes.Buffer // the error document or count, or a partial SSE event
	enc    *eventstream.Encoder
	frames *provider.SSEFrames
	err    error // the first write error to the client, sticky
}

const (
	passAnswer uint8 = iota
	errorAnswer
	streamAnswer
	countAnswer // a count_tokens answer, written by Finish
)

func newBedrockWriter(w http.ResponseWriter) *bedrockWriter { return &bedrockWriter{w: w} }

func (b *bedrockWriter) Header() http.Header         { return b.w.Header() }
func (b *bedrockWriter) Unwrap() http.ResponseWriter { return b.w }

func (b *bedrockWriter) WriteHeader(status int) {
	if b.status != 0 {
		return
	}
	b.status = status
	h := b.w.Header()
	if id := h.Get("X-Request-Id"); id != "" {
		h.Set("X-Amzn-Requestid", id) // where the AWS SDKs read an answer's request id
	}
	switch {
	case status >= 400:
		b.mode = errorAnswer // written by Finish
		return
	case b.count:
		b.mode = countAnswer // written by Finish
		return
	case isEventStream(h.Get("Content-Type")):
		b.mode = streamAnswer
		h.Set("Content-Type", eventStreamType)
		h.Del("Content-Length")
		b.enc = eventstream.NewEncoder()
		b.frames = &provider.SSEFrames{}
	}
	b.w.WriteHeader(status)
}

func (b *bedrockWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.WriteHeader(http.StatusOK)
	}
	switch b.mode {
	case errorAnswer, countAnswer:
		if b.held.Len()+len(p) <= maxDoorError {
			b.held.Write(p)
		}
		return len(p), nil
	case streamAnswer:
		if b.err != nil {
			return 0, b.err
		}
		b.frames.Feed(p, b.frame)
		return len(p), b.err
	}
	return b.w.Write(p)
}

// frame writes one SSE event as its event-stream message: a Messages
// event as a chunk of its bytes, an error event as the exception it
// stands for; a ping, which Bedrock does not send, as nothing.
func (b *bedrockWriter) frame(typ string, data []byte) {
	if b.err != nil || typ == "ping" {
		return
	}
	var msg eventstream.Message
	if typ == "error" {
		kind, text := anthropicError(data)
		name := bedrockException(kind, 0)
		// Stream exceptions are named in lower camel case
		// (throttlingException), as Bedrock sends them.
		name = strings.ToLower(name[:1]) + name[1:]
		msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
		msg.Headers.Set(":exception-type", eventstream.StringValue(name))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Payload = []byte(`{"message":` + quote(text) + `}`)
	} else {
		msg.Headers.Set(":event-type", eventstream.StringValue("chunk"))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		payload := make([]byte, 0, len(`{"bytes":""}`)+base64.StdEncoding.EncodedLen(len(data)))
		payload = append(payload, `{"bytes":"`...)
		payload = base64.StdEncoding.AppendEncode(payload, data)
		msg.Payload = append(payload, `"}`...)
	}
	b.err = b.enc.Encode(b.w, msg)
}

func (b *bedrockWriter) FlushError() error {
	if b.mode == errorAnswer || b.mode == countAnswer {
		return nil // nothing of a held answer goes before Finish
	}
	if b.err != nil {
		return b.err
	}
	return http.NewResponseController(b.w).Flush()
}

func (b *bedrockWriter) Finish() error {
	switch b.mode {
	case errorAnswer:
		kind, msg := anthropicError(b.held.Bytes())
		h := b.w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Amzn-Errortype", bedrockException(kind, b.status))
		h.Del("Content-Length")
		b.w.WriteHeader(b.status)
		_, err := b.w.Write([]byte(`{"message":` + quote(msg) + `}`))
		return err
	case streamAnswer:
		b.frames.Feed([]byte("\n\n"), b.frame) // an event the stream left unterminated
		return b.err
	case countAnswer:
		out, ok := bedrockCount(b.held.Bytes())
		if !ok {
			out = b.held.Bytes() // not a count: as it came
		}
		h := b.w.Header()
		h.Set("Content-Length", strconv.Itoa(len(out)))
		b.w.WriteHeader(b.status)
		_, err := b.w.Write(out)
		return err
	}
	return nil
}

// isEventStream reports whether a Content-Type is SSE's.
func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

var _ io.Writer = (*bedrockWriter)(nil)
