package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
)

// Claude on Amazon Bedrock (docs/routing.md "Platforms"): Bedrock Runtime
// carries the Messages API in an envelope of its own. The request goes to
// POST {base_url}/model/{modelId}/invoke, or /invoke-with-response-stream
// for a stream, with the target's model as the model id; the body loses
// its "model" member and gains "anthropic_version" (and the client's
// anthropic-beta header as "anthropic_beta"); every other byte is the
// client's. A whole answer is the Messages answer as Anthropic sends it;
// a stream comes in AWS event-stream framing, each chunk carrying one
// Messages stream event, which the node re-frames as the SSE event it
// is. Bedrock's error answers become Anthropic error documents with the
// same status, so that the rest of the request path reads them as it reads
// Anthropic's own.

// BedrockVersion is the anthropic_version Bedrock requires in the body.
const BedrockVersion = "bedrock-2023-05-31"

// BedrockSigningName is Bedrock Runtime's SigV4 service name.
const BedrockSigningName = "bedrock"

// bedrockMessages is Messages on Bedrock.
var bedrockMessages = &provider.Envelope{
	URL:         bedrockURL,
	Body:        bedrockBody,
	Header:      bedrockHeader,
	Answer:      bedrockAnswer,
	SigningName: BedrockSigningName,
}

// BedrockModelPath returns the escaped path segment of a Bedrock model id,
// as the AWS SDKs write it: every byte but ASCII letters, digits and
// "-._~" percent-encoded, so that an inference-profile ARN
// ("arn:aws:bedrock:…:inference-profile/us.anthropic…") stays one
// segment and its ":" and "/" are "%3A" and "%2F".
func BedrockModelPath(model string) string { return httpbinding.EscapePath(model, true) }

// bedrockURL is {base}/model/{modelId}/invoke or
// /invoke-with-response-stream, the model id escaped as AWS escapes it;
// Path holds it unescaped, RawPath as sent.
func bedrockURL(base *url.URL, model string, stream bool) (*url.URL, error) {
	if model == "" {
		return nil, errors.New("anthropic: empty bedrock model id")
	}
	op := "/invoke"
	if stream {
		op = "/invoke-with-response-stream"
	}
	u := *base
	u.Path = base.Path + "/model/" + model + op
	u.RawPath = base.EscapedPath() + "/model/" + BedrockModelPath(model) + op
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	return &u, nil
}

// bedrockVersionMember replaces the model member: the version Bedrock
// requires, in the member's place.
var bedrockVersionMember = []byte(`"anthropic_version":"` + BedrockVersion + `"`)

// bedrockBody is the body with its model member replaced by
// "anthropic_version" and, when the client sent anthropic-beta headers,
// "anthropic_beta": the list of their comma-separated values.
func bedrockBody(r *provider.Request, body []byte, client http.Header, dst *provider.Pieces) error {
	member := bedrockVersionMember
	if betas := betaList(client.Values("Anthropic-Beta")); len(betas) > 0 {
		list, err := json.Marshal(betas)
		if err != nil {
			return fmt.Errorf("anthropic: bedrock anthropic_beta: %w", err)
		}
		member = make([]byte, 0, len(bedrockVersionMember)+len(list)+20)
		member = append(member, bedrockVersionMember...)
		member = append(member, `,"anthropic_beta":`...)
		member = append(member, list...)
	}
	if !r.SplitMember(body, member, dst) {
		return errors.New("anthropic: bedrock body: no model member where inspection found it")
	}
	return nil
}

// betaList splits anthropic-beta header values at commas, as Anthropic
// reads them, without the empty ones.
func betaList(values []string) []string {
	var out []string
	for _, v := range values {
		for b := range strings.SplitSeq(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out = append(out, b)
			}
		}
	}
	return out
}

// bedrockHeader drops what Bedrock takes in the body (anthropic-version,
// anthropic-beta) or does not take at all (Accept names the model's
// output type there), and sends a static credential as a Bedrock API key:
// Authorization: Bearer. An aws credential signs the request afterwards
// and replaces Authorization.
func bedrockHeader(h http.Header, credential string) {
	h.Del("Anthropic-Version")
	h.Del("Anthropic-Beta")
	h.Del("Accept")
	h.Del("X-Api-Key")
	if credential != "" {
		h.Set("Authorization", "Bearer "+credential)
	}
}

// eventStreamType is the media type of an AWS event stream.
const eventStreamType = "application/vnd.amazon.eventstream"

// maxBedrockError bounds the error document read to translate it.
const maxBedrockError = 64 << 10

// bedrockAnswer re-frames a stream as SSE and turns an error answer into
// the Anthropic error document with the same status; a whole answer
// passes unchanged.
func bedrockAnswer(resp *http.Response, body io.Reader) io.Reader {
	if resp.StatusCode/100 == 2 {
		if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && mt == eventStreamType {
			resp.Header.Set("Content-Type", "text/event-stream")
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
			return NewEventStream(body)
		}
		return body
	}
	data, err := io.ReadAll(io.LimitReader(body, maxBedrockError))
	if err != nil {
		return errReader{err}
	}
	doc := bedrockError(resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), data)
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return bytes.NewReader(doc)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// bedrockErrorTypes maps Bedrock Runtime's exception names to Anthropic
// error types; the status decides the others (ErrorType).
var bedrockErrorTypes = map[string]string{
	"ThrottlingException":           "rate_limit_error",
	"ModelNotReadyException":        "overloaded_error",
	"ServiceUnavailableException":   "overloaded_error",
	"ModelStreamErrorException":     "api_error",
	"ModelErrorException":           "api_error",
	"InternalServerException":       "api_error",
	"ModelTimeoutException":         "timeout_error",
	"ValidationException":           "invalid_request_error",
	"ServiceQuotaExceededException": "rate_limit_error",
	"ResourceNotFoundException":     "not_found_error",
	"AccessDeniedException":         "permission_error",
	"UnrecognizedClientException":   "authentication_error",
	"InvalidSignatureException":     "authentication_error",
	"ExpiredTokenException":         "authentication_error",
	"IncompleteSignatureException":  "authentication_error",
}

// bedrockError is an Anthropic error document for a Bedrock error answer:
// kind from the x-amzn-ErrorType header ("ThrottlingException:http://…")
// or the body's __type, message from the body's message (any case).
func bedrockError(status int, errType string, body []byte) []byte {
	var doc struct {
		Message  string `json:"message"`
		Message2 string `json:"Message"`
		Type     string `json:"__type"`
	}
	_ = json.Unmarshal(body, &doc) // a body that is not JSON leaves the message empty
	if errType == "" {
		errType = doc.Type
	}
	name, _, _ := strings.Cut(errType, ":")
	name = name[strings.LastIndexByte(name, '#')+1:] // "com.amazon…#ThrottlingException"
	msg := doc.Message
	if msg == "" {
		msg = doc.Message2
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	kind, ok := bedrockErrorTypes[name]
	if !ok {
		kind = ErrorType(status)
	}
	return errorDoc(kind, msg)
}

// errorDoc is the Anthropic error document {"type":"error","error":{…}}.
func errorDoc(kind, msg string) []byte {
	b, err := json.Marshal(errorBody{Type: "error", Error: errorObject{Type: kind, Message: msg}})
	if err != nil { // unreachable: only strings are marshalled
		return []byte(`{"type":"error","error":{"type":"api_error","message":"internal error"}}`)
	}
	return b
}

// ErrEventStream is a Bedrock event stream the node cannot read: a frame
// whose checksum or length is wrong, or a chunk that is not the JSON and
// base64 Bedrock sends. Nothing of such a frame reaches the client; the
// request path treats it as the provider failing mid-stream.
var ErrEventStream = errors.New("anthropic: bad bedrock event stream")

// NewEventStream reads a Bedrock response stream (AWS event-stream framing,
// decoded and CRC-checked by the AWS SDK's codec) and yields the SSE
// events it carries: each chunk's Messages stream event, unchanged, as
// "event: {type}\ndata: {json}\n\n", in order, one frame at a time, so that
// a reader that flushes per event flushes per frame. An exception message
// (throttlingException, modelStreamErrorException, validationException…)
// becomes Anthropic's in-band `event: error`, never a clean end. Not safe
// for concurrent use.
func NewEventStream(r io.Reader) io.Reader {
	f := &bedrockFrames{}
	return provider.NewAWSEventStream(r, ErrEventStream, f.frame)
}

// bedrockFrames turns the messages of one Bedrock response stream into
// SSE; ev is a chunk's decoded bytes, reused.
type bedrockFrames struct{ ev []byte }

// frame appends what message m becomes to out: nothing for a message the
// node does not know.
func (f *bedrockFrames) frame(m eventstream.Message, out []byte) ([]byte, error) {
	switch provider.EventStreamHeader(m.Headers, ":message-type") {
	case "event":
		if provider.EventStreamHeader(m.Headers, ":event-type") != "chunk" {
			return out, nil // an event type the node does not know carries no Messages event
		}
		return f.chunk(m.Payload, out)
	case "exception":
		return bedrockInBand(out, provider.EventStreamHeader(m.Headers, ":exception-type"), m.Payload), nil
	case "error":
		return bedrockInBand(out, provider.EventStreamHeader(m.Headers, ":error-code"), []byte(`{"message":`+quote(provider.EventStreamHeader(m.Headers, ":error-message"))+`}`)), nil
	}
	return out, nil
}

// chunk appends the SSE event of a chunk's payload, {"bytes":"<base64>"}
// (Bedrock pads it with other members, which are ignored).
func (f *bedrockFrames) chunk(payload, out []byte) ([]byte, error) {
	b64, ok, err := jsonedit.Lookup(payload, "bytes")
	if err != nil || !ok || len(b64) < 2 || b64[0] != '"' || bytes.IndexByte(b64, '\\') >= 0 {
		return out, fmt.Errorf("%w: chunk without its bytes", ErrEventStream)
	}
	b64 = b64[1 : len(b64)-1]
	need := base64.StdEncoding.DecodedLen(len(b64))
	if cap(f.ev) < need {
		f.ev = make([]byte, need)
	}
	n, err := base64.StdEncoding.Decode(f.ev[:need], b64)
	if err != nil {
		return out, fmt.Errorf("%w: chunk bytes: %w", ErrEventStream, err)
	}
	return appendMessagesEvent(out, f.ev[:n])
}

// appendMessagesEvent appends ev, one Messages stream event's JSON, as
// its SSE event: its "type" names it; each line of it is a data line.
func appendMessagesEvent(out, ev []byte) ([]byte, error) {
	t, ok, err := jsonedit.Lookup(ev, "type")
	var typ []byte
	switch {
	case err != nil || !ok || len(t) < 2 || t[0] != '"':
	case bytes.IndexByte(t, '\\') < 0:
		typ = t[1 : len(t)-1] // the common case: no escape, no allocation
	default:
		var s string
		if err = json.Unmarshal(t, &s); err == nil {
			typ = []byte(s)
		}
	}
	if err != nil || len(typ) == 0 || bytes.ContainsAny(typ, "\r\n") {
		return out, fmt.Errorf("%w: chunk is not a Messages stream event", ErrEventStream)
	}
	out = append(out, "event: "...)
	out = append(out, typ...)
	out = append(out, '\n')
	for line := range bytes.Lines(ev) {
		out = append(out, "data: "...)
		out = append(out, bytes.TrimRight(line, "\r\n")...)
		out = append(out, '\n')
	}
	return append(out, '\n'), nil
}

// bedrockInBand appends the `event: error` of an exception message: its name
// ("throttlingException") decides the Anthropic error type, its payload
// ({"message":…}) the message.
func bedrockInBand(out []byte, name string, payload []byte) []byte {
	if name != "" {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	doc := bedrockError(0, name, payload)
	if _, ok := bedrockErrorTypes[name]; !ok {
		doc = bedrockError(500, "", payload)
	}
	out = append(out, "event: error\ndata: "...)
	out = append(out, doc...)
	return append(out, "\n\n"...)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
