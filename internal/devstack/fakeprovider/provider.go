package fakeprovider

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol names the wire format of a request.
type Protocol string

// The protocol pools (docs/api.md).
const (
	OpenAI    Protocol = "openai"
	Anthropic Protocol = "anthropic"
	Gemini    Protocol = "gemini"
	// Bedrock is Claude on Amazon Bedrock Runtime (bedrock.go).
	Bedrock Protocol = "bedrock"
)

// maxBody bounds how much of a request body the fake reads (the gateway's
// default body limit, docs/api.md "Body limit", doubled so the gateway's own limit is what tests hit).
const maxBody = 64 << 20

// ErrStarted is returned by Start and StartTLS when the provider already
// serves, or has been closed.
var ErrStarted = errors.New("fakeprovider: already started or closed")

// Options configures a Provider. The zero value is usable: no credentials
// are checked and timestamps come from time.Now.
type Options struct {
	// OpenAIKey, when set, is the Bearer key /v1/chat/completions requires.
	OpenAIKey string
	// AnthropicKey, when set, is the key /v1/messages requires in x-api-key
	// (or Authorization: Bearer).
	AnthropicKey string
	// GeminiKey, when set, is the key the Gemini paths require in
	// x-goog-api-key (or ?key=).
	GeminiKey string
	// Models lists the ids GET /v1/models returns (default: gpt-4o-mini and
	// claude-sonnet-4-5). Any model is accepted on the chat endpoints.
	Models []string
	// Clock stamps `created` fields and rate-limit reset headers (default time.Now).
	Clock func() time.Time
	// Script, when it returns non-nil, decides the answer instead of the
	// directives in the last user message. It is called concurrently.
	Script func(r Request) *Behaviour

	// BedrockKeys, when set, are the AWS keys whose SigV4 signature the
	// Bedrock paths require (a bad signature is AWS's 403).
	BedrockKeys BedrockKeys
	// BedrockAPIKey, when set, is a Bedrock API key the Bedrock paths take
	// as Authorization: Bearer.
	BedrockAPIKey string

	// VertexTokens, when set, decides which access tokens the Vertex paths
	// take (vertex.go): faketoken.NewGoogle's issuer. nil: any.
	VertexTokens TokenChecker
	// VertexProject, when set, is the only project the Vertex paths serve
	// (another is Google's 403 PERMISSION_DENIED).
	VertexProject string
	// AzureKey, when set, is the api-key the Azure OpenAI paths
	// (/openai/…, azure.go) take; AzureToken, when set, decides a Bearer
	// token there. Neither set: the Azure paths refuse every request.
	AzureKey   string
	AzureToken AzureAuth
}

// Request is what the provider received.
type Request struct {
	// Seq is the 1-based arrival order since New or the last Reset.
	Seq      int64
	Protocol Protocol // "" for a path the fake does not serve
	Method   string
	Path     string
	Header   http.Header // a clone of the request's headers
	Body     []byte      // the whole body as received
	// Model, Stream and IncludeUsage are read from the body (zero when absent
	// or when the body is not JSON).
	Model        string
	Stream       bool
	IncludeUsage bool
	// Prompt is the text of the last user message, directives included.
	Prompt string
	// Azure says the request came on an Azure OpenAI path (Path is then
	// that path); Deployment is the path's deployment ("" on /openai/v1
	// and /openai/responses).
	Azure      bool
	Deployment string
}

// clone returns a deep copy of r.
func (r Request) clone() Request {
	r.Header = r.Header.Clone()
	r.Body = append([]byte(nil), r.Body...)
	return r
}

// Provider is the fake. Create it with New; it is an http.Handler on its own,
// or serves itself with Start / StartTLS.
type Provider struct {
	// immutable after New
	o Options

	// atomic
	conns         atomic.Int64
	vertexProject atomic.Pointer[string] // Options.VertexProject, or SetVertexProject's

	mu sync.Mutex
	// guarded by mu
	log    []Request
	count  int64
	srv    *http.Server
	done   chan struct{} // closed when srv.Serve returns
	closed bool
	stop   chan struct{} // closed by Close: ends the realtime sessions, which the server does not see
	// inflight counts running handlers; Add only under mu while !closed, so
	// Close's Wait never races a new Add.
	inflight sync.WaitGroup
}

// New returns a Provider configured by o.
func New(o Options) *Provider {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Models == nil {
		o.Models = []string{"gpt-4o-mini", "claude-sonnet-4-5"}
	}
	p := &Provider{o: o, stop: make(chan struct{})}
	p.vertexProject.Store(&o.VertexProject)
	return p
}

// SetVertexProject makes project the only one the Vertex paths serve from
// now on ("" = any).
func (p *Provider) SetVertexProject(project string) { p.vertexProject.Store(&project) }

// Start serves the provider on addr (for example "127.0.0.1:0") and returns
// its base URL, "http://HOST:PORT/v1": the OpenAI SDK's and the gateway's
// backend base_url. The server root (the Anthropic SDK's base URL) is the same
// without "/v1".
func (p *Provider) Start(addr string) (baseURL string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("fakeprovider: listen: %w", err)
	}
	if err := p.serve(ln); err != nil {
		return "", err
	}
	return "http://" + ln.Addr().String() + "/v1", nil
}

// StartTLS is Start over TLS with a self-signed certificate for 127.0.0.1,
// ::1 and localhost generated now. pool holds that certificate, for the
// client's RootCAs. The base URL is "https://HOST:PORT/v1".
func (p *Provider) StartTLS(addr string) (baseURL string, pool *x509.CertPool, err error) {
	cert, pool, err := selfSigned(time.Now())
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("fakeprovider: listen: %w", err)
	}
	tln := tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"}, // see the package doc: HTTP/1.1 only
		MinVersion:   tls.VersionTLS12,
	})
	if err := p.serve(tln); err != nil {
		return "", nil, err
	}
	return "https://" + ln.Addr().String() + "/v1", pool, nil
}

// serve starts the one http.Server of p on ln; Close stops it.
func (p *Provider) serve(ln net.Listener) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil || p.closed {
		_ = ln.Close()
		return ErrStarted
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	p.srv = &http.Server{
		Handler:           p,
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // handshake noise from tests that expect failure
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				p.conns.Add(1)
			}
		},
	}
	p.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln) // always ErrServerClosed after Close
	}(p.srv, p.done)
	return nil
}

// Close stops the server (closing every connection, which ends hanging
// handlers) and waits for the serve loop and every handler to return.
func (p *Provider) Close() error {
	p.mu.Lock()
	if !p.closed {
		close(p.stop)
	}
	p.closed = true
	srv, done := p.srv, p.done
	p.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
		<-done
	}
	p.inflight.Wait()
	if err != nil {
		return fmt.Errorf("fakeprovider: close: %w", err)
	}
	return nil
}

// Requests returns a copy of every request received since New or the last
// Reset, in arrival order.
func (p *Provider) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Request, len(p.log))
	for i, r := range p.log {
		out[i] = r.clone()
	}
	return out
}

// RequestCount returns the number of requests received since New or the
// last Reset.
func (p *Provider) RequestCount() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// ConnCount returns the number of connections accepted since Start or the
// last Reset.
func (p *Provider) ConnCount() int64 { return p.conns.Load() }

// Reset forgets recorded requests and zeroes both counters.
func (p *Provider) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log, p.count = nil, 0
	p.conns.Store(0)
}

// enter registers a running handler; false once Close has begun.
func (p *Provider) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.inflight.Add(1)
	return true
}

// record stores r, assigning its Seq.
func (p *Provider) record(r Request) Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	r.Seq = p.count
	p.log = append(p.log, r.clone())
	return r
}

// ServeHTTP answers one request; see the package doc.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		http.Error(w, "fakeprovider: closed", http.StatusServiceUnavailable)
		return
	}
	defer p.inflight.Done()
	switch r.URL.Path {
	case "/v1/realtime":
		p.serveRealtime(w, r)
		return
	case LivePath:
		p.serveLive(w, r)
		return
	}
	p.serve1(w, r)
}

// serve1 answers one request, which a Vertex request is twice: once as
// itself, then on the path of the protocol it carries.
func (p *Provider) serve1(w http.ResponseWriter, r *http.Request) {
	recorded := r.URL.Path
	apath, deployment, versioned, azure := azureRoute(r)
	if azure && !p.serveAzure(w, r, apath, versioned) {
		return
	}
	proto, method, k := route(r)
	vc, isVertex := r.Context().Value(vertexKey{}).(vertexCall)

	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if model, stream, ok := converseRoute(r.URL.Path); ok && readErr == nil {
		p.serveConverse(w, r, body, model, stream)
		return
	}
	if model, op, ok := bedrockRoute(r.URL.Path); ok && readErr == nil {
		p.serveBedrock(w, r, body, model, op)
		return
	}
	if project, pub, model, m, ok := vertexRoute(r.URL.Path); ok && readErr == nil && !isVertex {
		p.serveVertex(w, r, body, project, pub, model, m)
		return
	}
	in, parseErr := parseBody(body)
	var audio audioForm
	if k == kindTranscribe || k == kindTranslate || k == kindImageEdit {
		audio, parseErr = parseAudioForm(body, r.Header.Get("Content-Type"))
		in.Model, in.Stream = audio.model, audio.stream
		in.Input, _ = json.Marshal(audio.prompt)
	}
	prompt, words, inputs := in.prompt(), in.words(), in.inputs()
	if proto == Gemini {
		// The model is in the path; the stream is the method's, in SSE
		// only when asked.
		_, in.Model, _ = geminiRoute(r.URL.Path)
		in.Stream = k == kindStreamGenerate && r.URL.Query().Get("alt") == "sse"
		prompt, words, inputs = parseGemini(body)
	}
	path := r.URL.Path
	if isVertex {
		path, in.Model = vc.path, vc.model
	}
	if azure {
		path = recorded
	}
	req := p.record(Request{
		Protocol:     proto,
		Method:       r.Method,
		Path:         path,
		Header:       r.Header,
		Azure:        azure,
		Deployment:   deployment,
		Body:         body,
		Model:        in.Model,
		Stream:       in.Stream,
		IncludeUsage: in.StreamOptions.IncludeUsage,
		Prompt:       prompt,
	})
	seq := req.Seq
	shape := proto // the error shape
	if shape == "" {
		shape = OpenAI
	}
	fail := func(status int, msg string) {
		p.writeError(w, shape, seq, errorSpec{status: status, msg: msg})
	}

	var tooLarge *http.MaxBytesError
	switch {
	case proto == "":
		fail(http.StatusNotFound, "fakeprovider: unknown path "+r.URL.Path)
		return
	case r.Method != method:
		w.Header().Set("Allow", method)
		fail(http.StatusMethodNotAllowed, "fakeprovider: method not allowed")
		return
	case errors.As(readErr, &tooLarge):
		fail(http.StatusRequestEntityTooLarge, "fakeprovider: body too large")
		return
	case readErr != nil:
		return // the client went away
	case !isVertex && !azure && !p.authorized(proto, r.Header) && !(proto == Gemini && p.o.GeminiKey != "" && same(r.URL.Query().Get("key"), p.o.GeminiKey)):
		fail(http.StatusUnauthorized, "")
		return
	case proto == Anthropic && !isVertex && r.Header.Get("anthropic-version") == "":
		fail(http.StatusBadRequest, "anthropic-version: header is required")
		return
	case k == kindModels:
		p.writeModels(w, proto, seq)
		return
	case parseErr != nil:
		fail(http.StatusBadRequest, "fakeprovider: body is not a JSON object")
		return
	case in.Model == "":
		fail(http.StatusBadRequest, "model: field is required")
		return
	}

	b, echo, err := p.behaviour(req)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	p.answer(w, r, proto, k, b, reply{
		seq:          seq,
		model:        in.Model,
		created:      p.o.Clock(),
		pieces:       split("echo: "+echo, b.Chunks),
		words:        words,
		b:            b,
		stream:       in.Stream && (k == kindChat || k == kindCompletions || k == kindImageGen || k == kindImageEdit || k == kindMessages || k == kindResponses || k == kindStreamGenerate),
		includeUsage: in.StreamOptions.IncludeUsage,
		inputs:       inputs,
		documents:    len(in.Documents),
		topN:         in.TopN,
		audio:        audio,
	})
}

// authorized checks the protocol's credential header when a key is set.
func (p *Provider) authorized(proto Protocol, h http.Header) bool {
	bearer, _ := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	switch proto {
	case OpenAI:
		return p.o.OpenAIKey == "" || same(bearer, p.o.OpenAIKey)
	case Gemini:
		return p.o.GeminiKey == "" || same(h.Get("x-goog-api-key"), p.o.GeminiKey)
	}
	return p.o.AnthropicKey == "" || same(h.Get("x-api-key"), p.o.AnthropicKey) || same(bearer, p.o.AnthropicKey)
}

func same(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// behaviour picks the Script's answer, else the directives', and returns the
// prompt with directives removed.
func (p *Provider) behaviour(req Request) (Behaviour, string, error) {
	if p.o.Script != nil {
		if b := p.o.Script(req.clone()); b != nil {
			return *b, strings.Join(strings.Fields(directiveRE.ReplaceAllString(req.Prompt, "")), " "), nil
		}
	}
	return ParseDirectives(req.Prompt)
}

// reply is one successful answer, before it is rendered in a protocol.
type reply struct {
	seq          int64
	model        string
	created      time.Time
	pieces       []string
	words        int
	b            Behaviour
	stream       bool
	includeUsage bool
	inputs       int // embeddings: the number of inputs
	documents    int // rerank: the number of documents
	topN         int // rerank: top_n, 0 when absent
	audio        audioForm
}

func (r reply) text() string { return strings.Join(r.pieces, "") }

// answer applies b (in the order Behaviour documents) and writes the reply.
func (p *Provider) answer(w http.ResponseWriter, r *http.Request, proto Protocol, k kind, b Behaviour, rp reply) {
	ctx := r.Context()
	if !wait(ctx, b.Delay) {
		return
	}
	switch {
	case b.Hang:
		<-ctx.Done()
		return
	case b.Reset:
		resetConn(w)
		return
	case b.Quota:
		p.writeError(w, proto, rp.seq, errorSpec{status: http.StatusTooManyRequests, quota: true, retryAfter: b.RetryAfter, rl: b.RateLimit})
		return
	case b.Status != 0:
		p.writeError(w, proto, rp.seq, errorSpec{status: b.Status, retryAfter: b.RetryAfter, msg: b.ErrorMessage, rl: b.RateLimit})
		return
	}

	p.setHeaders(w.Header(), proto, rp.seq, b.RateLimit)
	switch k {
	case kindSpeech:
		writeSpeech(w, rp)
		return
	case kindTranscribe, kindTranslate:
		p.writeAudioText(w, r, k, b, rp)
		return
	case kindImageGen, kindImageEdit:
		writeImage(w, r, k, b, rp)
		return
	}
	if !rp.stream {
		var body []byte
		switch k {
		case kindGenerate, kindStreamGenerate, kindGeminiCount, kindEmbedContent, kindBatchEmbed:
			body = geminiBody(k, rp)
		case kindChat:
			body = openAICompletion(rp)
		case kindCompletions:
			body = textCompletion(rp)
		case kindRerank:
			body = rerankBody(rp, r.URL.Path)
		case kindResponses:
			body = responsesBody(rp)
		case kindEmbeddings:
			body = embeddingsBody(rp, rp.inputs)
		case kindCountTokens:
			body = countTokensBody(rp)
		case kindCompact:
			body = compactBody(rp)
		case kindInputTokens:
			body = inputTokensBody(rp)
		default:
			body = anthropicMessage(rp)
		}
		switch {
		case b.Gzip:
			body = gzipped(body)
			w.Header().Set("Content-Encoding", "gzip")
		case b.ContentEncoding != "":
			w.Header().Set("Content-Encoding", b.ContentEncoding)
		}
		writeBody(w, http.StatusOK, body, b.Cut)
		return
	}
	var events []event
	var errEvent event
	switch k {
	case kindChat:
		events, errEvent = openAIStream(rp), openAIErrorEvent()
	case kindCompletions:
		events, errEvent = textCompletionStream(rp), openAIErrorEvent()
	case kindResponses:
		events, errEvent = responsesStream(rp), responsesErrorEvent()
	case kindStreamGenerate:
		events, errEvent = geminiStream(rp), geminiErrorEvent()
	default:
		events, errEvent = anthropicStream(rp), anthropicErrorEvent(rp.seq)
	}
	writeStream(ctx, w, b, events, errEvent)
}

// errorSpec describes an error answer.
type errorSpec struct {
	status     int
	quota      bool
	retryAfter time.Duration
	msg        string // "" = a default for the status
	rl         RateLimit
}

// writeError answers with an error in proto's shape (docs/api.md "Status codes").
func (p *Provider) writeError(w http.ResponseWriter, proto Protocol, seq int64, e errorSpec) {
	p.setHeaders(w.Header(), proto, seq, e.rl)
	if e.retryAfter > 0 {
		secs := (e.retryAfter + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
	}
	var body []byte
	switch proto {
	case Anthropic:
		body = anthropicError(e, seq)
	case Gemini:
		body = geminiError(e)
	default:
		body = openAIError(e)
	}
	writeBody(w, e.status, body, false)
}

// writeModels answers GET /v1/models in proto's list shape (docs/api.md "Endpoints").
func (p *Provider) writeModels(w http.ResponseWriter, proto Protocol, seq int64) {
	p.setHeaders(w.Header(), proto, seq, RateLimit{})
	var body []byte
	switch proto {
	case Anthropic:
		body = anthropicModels(p.o.Models, p.o.Clock())
	case Gemini:
		body = geminiModels(p.o.Models)
	default:
		body = openAIModels(p.o.Models, p.o.Clock())
	}
	writeBody(w, http.StatusOK, body, false)
}

// setHeaders adds the provider's response headers: request id, rate limits
// (rl's where it sets them), a cookie (for the gateway's response header
// allowlist) and a JSON Content-Type that writeStream replaces.
func (p *Provider) setHeaders(h http.Header, proto Protocol, seq int64, rl RateLimit) {
	h.Set("Content-Type", "application/json")
	h.Set("Set-Cookie", "__cf_bm=fakeprovider; path=/; HttpOnly; Secure; SameSite=None")
	id := fmt.Sprintf("req_fake%06d", seq)
	if proto == Gemini {
		return // Google's answers carry no request id or rate-limit headers
	}
	requests, tokens := int64(9999), int64(199000)
	if proto == Anthropic {
		requests, tokens = 3999, 399000
	}
	if rl.Requests != nil {
		requests = int64(*rl.Requests)
	}
	if rl.Tokens != nil {
		tokens = int64(*rl.Tokens)
	}
	if proto == Anthropic {
		d := time.Minute
		if rl.Reset > 0 {
			d = rl.Reset
		}
		// RFC 3339 with whole seconds: round up, so that the reset is never
		// earlier than the one asked for.
		at := p.o.Clock().Add(d)
		if t := at.Truncate(time.Second); !t.Equal(at) {
			at = t.Add(time.Second)
		}
		reset := at.UTC().Format(time.RFC3339)
		h.Set("Request-Id", id)
		h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.FormatInt(max(4000, requests), 10))
		h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.FormatInt(requests, 10))
		h.Set("Anthropic-Ratelimit-Requests-Reset", reset)
		h.Set("Anthropic-Ratelimit-Tokens-Limit", strconv.FormatInt(max(400000, tokens), 10))
		h.Set("Anthropic-Ratelimit-Tokens-Remaining", strconv.FormatInt(tokens, 10))
		h.Set("Anthropic-Ratelimit-Tokens-Reset", reset)
		return
	}
	reqReset, tokReset := "6ms", "300ms"
	if rl.Reset > 0 {
		// Go's duration form is OpenAI's: "30s", "6m0s", "20ms".
		reqReset, tokReset = rl.Reset.String(), rl.Reset.String()
	}
	h.Set("X-Request-Id", id)
	h.Set("Openai-Version", "2020-10-01")
	h.Set("Openai-Processing-Ms", "1")
	h.Set("X-Ratelimit-Limit-Requests", strconv.FormatInt(max(10000, requests), 10))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(requests, 10))
	h.Set("X-Ratelimit-Reset-Requests", reqReset)
	h.Set("X-Ratelimit-Limit-Tokens", strconv.FormatInt(max(200000, tokens), 10))
	h.Set("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(tokens, 10))
	h.Set("X-Ratelimit-Reset-Tokens", tokReset)
}
