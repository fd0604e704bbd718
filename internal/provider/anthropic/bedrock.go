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

// EventStream reads a Bedrock response stream (AWS event-stream framing,
// decoded and CRC-checked by the AWS SDK's codec) and yields the SSE
// events it carries: each chunk's Messages stream event, unchanged, as
// "event: {type}\ndata: {json}\n\n", in order, one frame at a time, so that
// a reader that flushes per event flushes per frame. An exception message
// (throttlingException, modelStreamErrorException, validationException…)
// becomes Anthropic's in-band `event: error`, never a clean end. Not safe
// for concurrent use.
type EventStream struct {
	r       io.Reader
	dec     *eventstream.Decoder
	payload []byte // the decoder's payload buffer, reused
	ev      []byte // a chunk's decoded bytes, reused
	out     []byte // SSE bytes not yet read
	off     int
	err     error // sticky
}

// NewEventStream returns the SSE reader of the Bedrock event stream r.
func NewEventStream(r io.Reader) *EventStream {
	return &EventStream{r: r, dec: eventstream.NewDecoder(), payload: make([]byte, 0, 4096)}
}

func (s *EventStream) Read(p []byte) (int, error) {
	for s.off == len(s.out) {
		if s.err != nil {
			return 0, s.err
		}
		s.out, s.off = s.out[:0], 0
		s.err = s.next()
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

// next decodes one message into s.out: nothing for a message the node
// does not know, an io.EOF at the end of the stream between messages.
func (s *EventStream) next() error {
	m, err := s.dec.Decode(s.r, s.payload[:0])
	if err != nil {
		if err == io.EOF { // the SDK's codec returns it unwrapped at a message boundary
			return io.EOF
		}
		return fmt.Errorf("%w: %w", ErrEventStream, err)
	}
	if cap(m.Payload) > cap(s.payload) {
		s.payload = m.Payload[:0]
	}
	switch header(m.Headers, ":message-type") {
	case "event":
		if header(m.Headers, ":event-type") != "chunk" {
			return nil // an event type the node does not know carries no Messages event
		}
		return s.chunk(m.Payload)
	case "exception":
		s.inBand(header(m.Headers, ":exception-type"), m.Payload)
		return nil
	case "error":
		s.inBand(header(m.Headers, ":error-code"), []byte(`{"message":`+quote(header(m.Headers, ":error-message"))+`}`))
		return nil
	}
	return nil
}

// chunk appends the SSE event of a chunk's payload, {"bytes":"<base64>"}
// (Bedrock pads it with other members, which are ignored).
func (s *EventStream) chunk(payload []byte) error {
	b64, ok, err := jsonedit.Lookup(payload, "bytes")
	if err != nil || !ok || len(b64) < 2 || b64[0] != '"' || bytes.IndexByte(b64, '\\') >= 0 {
		return fmt.Errorf("%w: chunk without its bytes", ErrEventStream)
	}
	b64 = b64[1 : len(b64)-1]
	need := base64.StdEncoding.DecodedLen(len(b64))
	if cap(s.ev) < need {
		s.ev = make([]byte, need)
	}
	n, err := base64.StdEncoding.Decode(s.ev[:need], b64)
	if err != nil {
		return fmt.Errorf("%w: chunk bytes: %w", ErrEventStream, err)
	}
	return s.event(s.ev[:n])
}

// event appends ev, one Messages stream event's JSON, as its SSE event:
// its "type" names it; each line of it is a data line.
func (s *EventStream) event(ev []byte) error {
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
		return fmt.Errorf("%w: chunk is not a Messages stream event", ErrEventStream)
	}
	s.out = append(s.out, "event: "...)
	s.out = append(s.out, typ...)
	s.out = append(s.out, '\n')
	for line := range bytes.Lines(ev) {
		s.out = append(s.out, "data: "...)
		s.out = append(s.out, bytes.TrimRight(line, "\r\n")...)
		s.out = append(s.out, '\n')
	}
	s.out = append(s.out, '\n')
	return nil
}

// inBand appends the `event: error` of an exception message: its name
// ("throttlingException") decides the Anthropic error type, its payload
// ({"message":…}) the message.
func (s *EventStream) inBand(name string, payload []byte) {
	if name != "" {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	doc := bedrockError(0, name, payload)
	if _, ok := bedrockErrorTypes[name]; !ok {
		doc = bedrockError(500, "", payload)
	}
	s.out = append(s.out, "event: error\ndata: "...)
	s.out = append(s.out, doc...)
	s.out = append(s.out, "\n\n"...)
}

// header returns the string value of an event-stream header, "" when it is
// absent or not a string.
func header(hs eventstream.Headers, name string) string {
	if v, ok := hs.Get(name).(eventstream.StringValue); ok {
		return string(v)
	}
	return ""
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
