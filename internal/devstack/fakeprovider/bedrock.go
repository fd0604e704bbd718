package fakeprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Amazon Bedrock Runtime, as far as Claude on Bedrock uses it:
// POST /model/{modelId}/invoke and /invoke-with-response-stream, signed
// with SigV4 (service bedrock) or carrying a Bedrock API key as Bearer;
// the body is the Messages body without "model", with anthropic_version
// "bedrock-2023-05-31"; a stream is AWS event-stream framing (encoded
// with the AWS SDK's codec), one chunk per Messages event, its payload
// {"bytes":"<base64 event>"}; errors are {"message":…} with
// x-amzn-ErrorType. POST /model/{modelId}/count-tokens takes that invoke
// body base64-encoded in {"input":{"invokeModel":{"body":…}}} and answers
// {"inputTokens":N}, N the words of the invoke body.

// BedrockKeys are the AWS keys the fake's Bedrock paths accept.
type BedrockKeys struct {
	AccessKeyID, SecretAccessKey string
	SessionToken                 string // "" when the keys are long-term
}

// BedrockVersion is the anthropic_version Bedrock requires.
const BedrockVersion = "bedrock-2023-05-31"

// Bedrock Runtime operations the fake serves.
const (
	bedrockInvoke = iota
	bedrockStreamOp
	bedrockCount
)

// bedrockRoute reads /model/{modelId}/invoke[-with-response-stream] and
// /model/{modelId}/count-tokens; the model id is the decoded segment.
func bedrockRoute(path string) (model string, op int, ok bool) {
	rest, ok := strings.CutPrefix(path, "/model/")
	if !ok {
		return "", 0, false
	}
	for _, o := range []struct {
		suffix string
		op     int
	}{{"/invoke-with-response-stream", bedrockStreamOp}, {"/invoke", bedrockInvoke}, {"/count-tokens", bedrockCount}} {
		if m, found := strings.CutSuffix(rest, o.suffix); found {
			return m, o.op, true
		}
	}
	return "", 0, false
}

// bedrockCountInput reads a count-tokens body,
// {"input":{"invokeModel":{"body":"<base64>"}}}, and returns the invoke
// body it carries.
func bedrockCountInput(body []byte) ([]byte, bool) {
	var in struct {
		Input struct {
			InvokeModel *struct {
				Body []byte `json:"body"` // base64 in JSON, as encoding/json reads []byte
			} `json:"invokeModel"`
		} `json:"input"`
	}
	if json.Unmarshal(body, &in) != nil || in.Input.InvokeModel == nil || len(in.Input.InvokeModel.Body) == 0 {
		return nil, false
	}
	return in.Input.InvokeModel.Body, true
}

// serveBedrock answers one Bedrock Runtime request.
func (p *Provider) serveBedrock(w http.ResponseWriter, r *http.Request, body []byte, model string, op int) {
	stream := op == bedrockStreamOp
	invoke, countOK := body, true
	if op == bedrockCount {
		invoke, countOK = bedrockCountInput(body)
	}
	in, parseErr := parseBody(invoke)
	req := p.record(Request{
		Protocol: Bedrock, Method: r.Method, Path: r.URL.Path, Header: r.Header, Body: body,
		Model: model, Stream: stream, Prompt: in.prompt(),
	})
	fail := bedrockFail(w, req.Seq)
	if !p.bedrockAdmit(r, body, fail) {
		return
	}
	var env struct {
		Model   *json.RawMessage `json:"model"`
		Version string           `json:"anthropic_version"`
	}
	switch {
	case !countOK:
		fail(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'input' failed to satisfy constraint: Member must not be null")
		return
	case parseErr != nil || json.Unmarshal(invoke, &env) != nil:
		fail(http.StatusBadRequest, "ValidationException", "Malformed input request, please reformat your input and try again.")
		return
	case env.Model != nil:
		fail(http.StatusBadRequest, "ValidationException", "Malformed input request: extraneous key [model] is not permitted, please reformat your input and try again.")
		return
	case env.Version != BedrockVersion:
		fail(http.StatusBadRequest, "ValidationException", "Malformed input request: anthropic_version is required to be "+BedrockVersion)
		return
	}
	b, echo, ok := p.bedrockScripted(r, req, fail)
	if !ok {
		return
	}
	ctx := r.Context()
	w.Header().Set("X-Amzn-Requestid", bedrockRequestID(req.Seq))
	if op == bedrockCount {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mustJSON(struct {
			InputTokens int `json:"inputTokens"`
		}{in.words()}))
		return
	}
	rp := reply{seq: req.Seq, model: model, created: p.o.Clock(), pieces: split("echo: "+echo, b.Chunks), words: in.words(), b: b, stream: stream}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", "1")
		_, _ = w.Write(anthropicMessage(rp))
		return
	}
	p.bedrockStream(ctx, w, b, anthropicStream(rp))
}

// bedrockStream writes events as event-stream chunk messages, flushed one
// by one, applying b's EventDelay, Cut, ErrorEvent (an exception message:
// BedrockException, or modelStreamErrorException) and BadCRC (a chunk
// whose message checksum is wrong, then the end).
func (p *Provider) bedrockStream(ctx context.Context, w http.ResponseWriter, b Behaviour, events []event) {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.Header().Set("X-Amzn-Bedrock-Content-Type", "application/json")
	rc := http.NewResponseController(w)
	enc := eventstream.NewEncoder()
	fault := -1
	switch {
	case b.Cut:
		fault = min(b.CutAfter, len(events)-1)
	case b.ErrorEvent || b.BadCRC:
		fault = min(b.ErrorAfter, len(events)-1)
	}
	for i, ev := range events {
		if i > 0 && !wait(ctx, b.EventDelay) {
			return
		}
		if i == fault {
			switch {
			case b.Cut:
				resetConn(w)
			case b.BadCRC:
				var buf bytes.Buffer
				_ = enc.Encode(&buf, chunkMessage(ev.data))
				frame := buf.Bytes()
				frame[len(frame)-5] ^= 0xff // the payload's last byte
				_, _ = w.Write(frame)
				_ = rc.Flush()
			default:
				name := orDefault(b.BedrockException, "modelStreamErrorException")
				var m eventstream.Message
				m.Headers.Set(":message-type", eventstream.StringValue("exception"))
				m.Headers.Set(":exception-type", eventstream.StringValue(name))
				m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
				m.Payload = mustJSON(struct {
					Message string `json:"message"`
				}{orDefault(b.ErrorMessage, "fakeprovider: scripted "+name)})
				_ = enc.Encode(w, m)
				_ = rc.Flush()
			}
			return
		}
		if err := enc.Encode(w, chunkMessage(ev.data)); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// chunkMessage is the event-stream chunk that carries one Messages event.
func chunkMessage(data []byte) eventstream.Message {
	var m eventstream.Message
	m.Headers.Set(":message-type", eventstream.StringValue("event"))
	m.Headers.Set(":event-type", eventstream.StringValue("chunk"))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Payload = mustJSON(struct {
		Bytes string `json:"bytes"`
		P     string `json:"p"`
	}{base64.StdEncoding.EncodeToString(data), "abcdefghijklmnopqrstuvwxyz"})
	return m
}

// bedrockAuthorized checks the request's SigV4 signature against the
// fake's keys by signing it again with the AWS SDK's signer (the
// headers it names, its date, its body), or its Bedrock API key. No keys
// set: anything goes. The answers are AWS's.
func (p *Provider) bedrockAuthorized(r *http.Request, body []byte) (kind, msg string, ok bool) {
	keys, apiKey := p.o.BedrockKeys, p.o.BedrockAPIKey
	if keys.AccessKeyID == "" && apiKey == "" {
		return "", "", true
	}
	auth := r.Header.Get("Authorization")
	if bearer, isBearer := strings.CutPrefix(auth, "Bearer "); isBearer {
		if apiKey != "" && same(bearer, apiKey) {
			return "", "", true
		}
		return "UnrecognizedClientException", "The security token included in the request is invalid.", false
	}
	cred, signed, sig, ok := parseSigV4(auth)
	if !ok || keys.AccessKeyID == "" {
		return "IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.", false
	}
	scope := strings.Split(cred, "/") // AKID/date/region/service/aws4_request
	if len(scope) != 5 || !same(scope[0], keys.AccessKeyID) || r.Header.Get("X-Amz-Security-Token") != keys.SessionToken {
		return "UnrecognizedClientException", "The security token included in the request is invalid.", false
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "IncompleteSignatureException", "X-Amz-Date is missing or malformed.", false
	}
	again, _ := http.NewRequest(r.Method, "http://placeholder", nil)
	again.URL = &url.URL{Scheme: "https", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath}
	again.Host = r.Host
	again.ContentLength = int64(len(body))
	for _, h := range strings.Split(signed, ";") {
		if h != "host" && h != "content-length" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	again.Header.Del("Authorization")
	sum := sha256.Sum256(body)
	err = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{
		AccessKeyID: keys.AccessKeyID, SecretAccessKey: keys.SecretAccessKey, SessionToken: keys.SessionToken,
	}, again, hex.EncodeToString(sum[:]), scope[3], scope[2], at)
	if err != nil {
		return "InvalidSignatureException", "fakeprovider: " + err.Error(), false
	}
	_, _, want, _ := parseSigV4(again.Header.Get("Authorization"))
	if scope[3] != "bedrock" || !same(sig, want) {
		return "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.", false
	}
	return "", "", true
}

// parseSigV4 reads "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
// Signature=…".
func parseSigV4(auth string) (cred, signed, sig string, ok bool) {
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "", "", "", false
	}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			sig = v
		}
	}
	return cred, signed, sig, cred != "" && signed != "" && sig != ""
}

// bedrockFail returns the writer of request seq's error answers, as
// Bedrock Runtime writes them: {"message"} with the exception's name in
// X-Amzn-Errortype.
func bedrockFail(w http.ResponseWriter, seq int64) func(status int, kind, msg string) {
	return func(status int, kind, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", kind+":http://internal.amazon.com/coral/com.amazon.bedrock/")
		w.Header().Set("X-Amzn-Requestid", bedrockRequestID(seq))
		w.WriteHeader(status)
		_, _ = w.Write(mustJSON(struct {
			Message string `json:"message"`
		}{msg}))
	}
}

// bedrockAdmit answers, through fail, a request that is no POST or is not
// authorized, as Bedrock does; it reports whether the request may go on.
func (p *Provider) bedrockAdmit(r *http.Request, body []byte, fail func(status int, kind, msg string)) bool {
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "ValidationException", "method not allowed")
		return false
	}
	if kind, msg, ok := p.bedrockAuthorized(r, body); !ok {
		fail(http.StatusForbidden, kind, msg)
		return false
	}
	return true
}

// bedrockScripted reads req's scripted behaviour and plays its delay and
// failures as Bedrock answers them, through fail; ok is false when it
// answered (or the client left), and the request ends there.
func (p *Provider) bedrockScripted(r *http.Request, req Request, fail func(status int, kind, msg string)) (b Behaviour, echo string, ok bool) {
	b, echo, err := p.behaviour(req)
	if err != nil {
		fail(http.StatusBadRequest, "ValidationException", err.Error())
		return b, "", false
	}
	if !wait(r.Context(), b.Delay) {
		return b, "", false
	}
	switch {
	case b.Status == http.StatusTooManyRequests || b.Quota:
		fail(http.StatusTooManyRequests, "ThrottlingException", "Too many requests, please wait before trying again.")
		return b, "", false
	case b.Status != 0:
		fail(b.Status, bedrockErrorName(b.Status), orDefault(b.ErrorMessage, "fakeprovider: scripted failure"))
		return b, "", false
	}
	return b, echo, true
}

func bedrockRequestID(seq int64) string { return fmt.Sprintf("fake-bedrock-%06d", seq) }

// bedrockErrorName is the exception Bedrock names for a status.
func bedrockErrorName(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "ValidationException"
	case http.StatusForbidden:
		return "AccessDeniedException"
	case http.StatusNotFound:
		return "ResourceNotFoundException"
	case http.StatusRequestTimeout:
		return "ModelTimeoutException"
	case http.StatusTooManyRequests:
		return "ThrottlingException"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableException"
	}
	return "InternalServerException"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
