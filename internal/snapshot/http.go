package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scootgate/scootgate/internal/secret"
)

// Defaults for HTTPOptions.
const (
	DefaultHTTPTimeout  = 30 * time.Second
	DefaultHTTPMaxBytes = 64 << 20
	DefaultHTTPStall    = 3 * time.Second
	DefaultHTTPSilence  = 10 * time.Second
)

// minProgress is how much of a body must arrive within each Stall for the
// answer to count as moving: a body trickled a few bytes at a time is a
// stalled one.
const minProgress = 16 << 10

// HTTPOptions configure an [HTTPSource].
type HTTPOptions struct {
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token secret.Secret
	// TLS is the client TLS configuration for https:// sources: RootCAs
	// for a private CA, Certificates (or GetClientCertificate) for mutual
	// TLS. nil means the system roots and no client certificate. It is
	// cloned; TLS 1.2 is the minimum. Certificates are always verified.
	TLS *tls.Config
	// Timeout bounds one request, from dialling to the last byte of the
	// body; DefaultHTTPTimeout when 0.
	Timeout time.Duration
	// LongPoll, when positive, asks the server to hold the request until
	// the document changes or this much time has passed, by appending
	// wait=<whole seconds> and keepalive=<whole seconds> to the query (and
	// sending "Prefer: wait=<same>, keepalive=<same>", RFC 7240; see
	// Silence). Each request may then take LongPoll + Timeout. A server
	// that holds requests says so with "Preference-Applied: wait=N" and
	// is asked again at once ([LongPoller]); servers that ignore the
	// parameter answer at once, which is still correct, and are polled at
	// the normal interval.
	LongPoll time.Duration
	// MaxBytes bounds the document (after content decoding);
	// DefaultHTTPMaxBytes when 0.
	MaxBytes int64
	// Stall bounds a request that makes no progress (docs/snapshots.md
	// "Long-poll: changes within a second"): the response headers must come within LongPoll (as
	// asked for) plus Stall, and then each 16 KiB of the body (or its
	// end) within Stall; DefaultHTTPStall when 0. A request abandoned so
	// is an [ErrStalled]. The poller then asks for no wait ([LongPoller]
	// Hold), so that a control plane that answers again is seen within
	// one Stall.
	Stall time.Duration
	// Silence bounds a held request that shows no byte: no headers, no
	// keepalive, no document (proto/control-plane.md "Keepalive");
	// DefaultHTTPSilence when 0. Every held request asks the control
	// plane for a keepalive byte every Silence/2 (whole seconds, at least
	// 1). Until a control plane has announced keepalive (it answers a held
	// request with "Preference-Applied: wait=N, keepalive=K"), the wait it
	// is asked for is capped at Silence, so a hung one is noticed within
	// Silence plus Stall; once it has, it is asked for the whole LongPoll
	// and its answer's headers, and each keepalive byte after them, must
	// come within Silence. A request given up so is an [ErrStalled].
	Silence time.Duration
}

// HTTPStatusError reports a response that is neither 200 nor 304.
type HTTPStatusError struct {
	Source string // the redacted source URL (see HTTPSource.String)
	Code   int
}

func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("snapshot: GET %s: unexpected status %d %s", e.Source, e.Code, http.StatusText(e.Code))
}

// HTTPSource pulls a document with HTTP GET (docs/snapshots.md). It is safe for
// concurrent use; fetches are serialized.
//
// Each request carries the bearer token, and, once the consumer has set a
// version (see [Versioner]), If-None-Match: "<version>". A 304 answer is
// "unchanged"; a 200 answer is read completely, within the deadline and
// the size limit, before any of it is returned, so a slow or truncated
// response is an error and never half a document. A 200 whose body has
// the same SHA-256 as the previous one is also reported unchanged, so a
// server that ignores If-None-Match costs a transfer but no decode.
//
// Requests go directly to the control plane, not through the egress proxy,
// and ignore HTTP_PROXY and friends: the control plane is an internal
// service, and the egress proxy is the path to providers (docs/egress.md). Any
// proxy on the way would be a second, unconfigured path. Redirects are not
// followed (the token would travel with them); a 3xx is an error.
type HTTPSource struct {
	// immutable
	name     string // redacted URL, for errors and logs
	plain    hold   // a request without wait=
	capped   hold   // a held request, its wait capped at silence; plain without long poll
	full     hold   // a held request, the whole long poll; plain without long poll
	token    secret.Secret
	timeout  time.Duration // per request, including LongPoll
	stall    time.Duration
	silence  time.Duration
	maxBytes int64
	client   *http.Client

	mu    sync.Mutex // serializes Fetch and guards the fields below
	etag  string     // If-None-Match to send; "" = unconditional
	known bool       // sum is the hash of the last document returned
	sum   [sha256.Size]byte
	held  bool // the server held the last request (Preference-Applied: wait)
	// noHold: requests ask for no wait ([LongPoller] Hold).
	noHold bool
	// keepalive: the last held answer announced keepalive
	// (Preference-Applied: keepalive=K), so the next held request asks for
	// the whole long poll.
	keepalive bool
}

// hold is one way of asking: the request URL, the Prefer header ("" for
// none) and how long the control plane may hold it.
type hold struct {
	url, prefer string
	wait        time.Duration
}

var (
	_ Forgetter  = (*HTTPSource)(nil)
	_ Versioner  = (*HTTPSource)(nil)
	_ LongPoller = (*HTTPSource)(nil)
)

// NewHTTPSource returns a source that pulls u. u must be an absolute
// http:// or https:// URL with a host and no user info or fragment
// (credentials belong in o.Token); http:// is accepted only for a loopback
// host (docs/egress.md applies the same rule to providers). Errors wrap
// [ErrUnsupportedSource] and do not repeat the URL.
func NewHTTPSource(u *url.URL, o HTTPOptions) (*HTTPSource, error) {
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return nil, fmt.Errorf("%w: expected an http:// or https:// URL", ErrUnsupportedSource)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: http(s) URL has no host", ErrUnsupportedSource)
	case u.User != nil:
		return nil, fmt.Errorf("%w: http(s) URL must not contain user info (use control_plane.token)", ErrUnsupportedSource)
	case u.Fragment != "":
		return nil, fmt.Errorf("%w: http(s) URL must not have a fragment", ErrUnsupportedSource)
	case scheme == "http" && !IsLoopback(u.Hostname()):
		return nil, fmt.Errorf("%w: plaintext http:// is only allowed for a loopback host; use https://", ErrUnsupportedSource)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultHTTPTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultHTTPMaxBytes
	}
	if o.Stall <= 0 {
		o.Stall = DefaultHTTPStall
	}
	if o.Silence <= 0 {
		o.Silence = DefaultHTTPSilence
	}
	req := *u
	req.Scheme = scheme
	plain := hold{url: req.String()}
	capped, full := plain, plain
	if o.LongPoll > 0 {
		keepalive := max(o.Silence/2/time.Second, 1)
		held := func(wait time.Duration) hold {
			secs := max(wait/time.Second, 1)
			q := fmt.Sprintf("wait=%d&keepalive=%d", secs, keepalive)
			r := req
			if r.RawQuery == "" {
				r.RawQuery = q
			} else {
				r.RawQuery += "&" + q
			}
			return hold{url: r.String(), prefer: fmt.Sprintf("wait=%d, keepalive=%d", secs, keepalive), wait: secs * time.Second}
		}
		capped, full = held(min(o.LongPoll, o.Silence)), held(o.LongPoll)
	}
	redacted := url.URL{Scheme: scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}

	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLS != nil {
		tlsConf = o.TLS.Clone()
		tlsConf.MinVersion = max(tlsConf.MinVersion, tls.VersionTLS12)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:               nil, // direct, by design: see the type's doc
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        2,
		IdleConnTimeout:     90 * time.Second,
	}
	return &HTTPSource{
		name:     redacted.String(),
		plain:    plain,
		capped:   capped,
		full:     full,
		token:    o.Token,
		timeout:  o.Timeout + max(o.LongPoll, 0),
		stall:    o.Stall,
		silence:  o.Silence,
		maxBytes: o.MaxBytes,
		client: &http.Client{
			Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}, nil
}

// Fetch implements [Source]. Errors name the redacted URL (scheme, host
// and path), never the query or the token.
func (s *HTTPSource) Fetch(ctx context.Context) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.held = false
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	h, limit := s.capped, s.capped.wait+s.stall
	switch {
	case s.noHold:
		h, limit = s.plain, s.stall
	case s.keepalive:
		// The control plane answers a held request at once and then
		// keeps it moving (proto/control-plane.md "Keepalive").
		h, limit = s.full, s.silence
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	watch := &watchdog{stall: s.stall, silence: s.silence, armed: limit, t: time.AfterFunc(limit, func() { stop(errNoProgress) })}
	defer watch.t.Stop()
	data, changed, err := s.fetch(ctx, h, watch)
	if err != nil && errors.Is(context.Cause(ctx), errNoProgress) {
		held := h.prefer != ""
		s.held = held // ask again at once, once ([LongPoller])
		if held {
			// Ask with the capped wait until the control plane shows
			// keepalive again: it may have stopped sending it.
			s.keepalive = false
			return nil, false, fmt.Errorf("%w: GET %s: held request showed no progress within %s", ErrStalled, s.name, watch.armed)
		}
		return nil, false, fmt.Errorf("%w: GET %s: no progress within %s", ErrStalled, s.name, watch.armed)
	}
	return data, changed, err
}

// errNoProgress is the cause of a request the watchdog ended.
var errNoProgress = errors.New("no progress")

// watchdog ends a request that makes no progress: it is armed for the
// headers, then re-armed for Stall whenever minProgress bytes of the body
// came in. Behind the headers of a held answer that announced keepalive,
// it is re-armed for Silence by every keepalive byte, until the document
// starts. Only the fetching goroutine touches its fields; the timer's
// func only cancels.
type watchdog struct {
	stall, silence time.Duration
	t              *time.Timer
	armed          time.Duration // what the timer was last set to, for the error
	got            int           // body bytes since the last re-arm
	keepalive      bool          // only keepalive bytes have come so far
}

func (w *watchdog) arm(d time.Duration) {
	w.armed = d
	w.t.Reset(d)
}

// headers re-arms the watchdog for the body; keepalive says the answer
// announced keepalive bytes before its document.
func (w *watchdog) headers(keepalive bool) {
	w.keepalive = keepalive
	if keepalive {
		w.arm(w.silence)
		return
	}
	w.arm(w.stall)
}

// watchedBody reports a body's progress to its watchdog.
type watchedBody struct {
	r io.Reader
	w *watchdog
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n == 0 {
		return n, err
	}
	got := n
	if b.w.keepalive {
		doc := bytes.TrimLeft(p[:n], keepaliveBytes)
		if len(doc) == 0 {
			b.w.arm(b.w.silence) // a keepalive
			return n, err
		}
		// The document starts: from here it must move like any body.
		b.w.keepalive, b.w.got, got = false, 0, len(doc)
		b.w.arm(b.w.stall)
	}
	if b.w.got += got; b.w.got >= minProgress {
		b.w.got = 0
		b.w.arm(b.w.stall)
	}
	return n, err
}

// keepaliveBytes are the bytes a control plane may send before the
// document of a held answer (proto/control-plane.md "Keepalive"): JSON
// whitespace, which any JSON decoder skips.
const keepaliveBytes = " \t\r\n"

// fetch is one request of Fetch as h says, reporting its progress to
// watch. s.mu is held.
func (s *HTTPSource) fetch(ctx context.Context, h hold, watch *watchdog) ([]byte, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return nil, false, s.wrap(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "scootgate")
	if !s.token.IsZero() {
		req.Header.Set("Authorization", "Bearer "+s.token.Reveal())
	}
	if s.etag != "" {
		req.Header.Set("If-None-Match", s.etag)
	}
	if h.prefer != "" {
		req.Header.Set("Prefer", h.prefer)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, false, s.wrap(err)
	}
	defer resp.Body.Close()
	held := h.prefer != "" && applied(resp.Header, "wait")
	keepalive := held && applied(resp.Header, "keepalive")
	if held {
		s.keepalive = keepalive
	}
	watch.headers(keepalive)

	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		if s.etag == "" {
			return nil, false, fmt.Errorf("snapshot: GET %s: 304 Not Modified to an unconditional request", s.name)
		}
		s.held = held
		return nil, false, nil
	default:
		return nil, false, &HTTPStatusError{Source: s.name, Code: resp.StatusCode}
	}
	if resp.ContentLength > s.maxBytes {
		return nil, false, fmt.Errorf("%w: GET %s: %d bytes, limit %d", ErrTooLarge, s.name, resp.ContentLength, s.maxBytes)
	}
	// Read everything before returning anything: a body cut short by the
	// server, the network or the deadline is an error here (Content-Length
	// or chunked framing), or fails to decode as a whole document later.
	data, err := io.ReadAll(io.LimitReader(&watchedBody{r: resp.Body, w: watch}, s.maxBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("snapshot: GET %s: read body: %w", s.name, unwrapURLError(err))
	}
	if int64(len(data)) > s.maxBytes {
		return nil, false, fmt.Errorf("%w: GET %s: over %d bytes", ErrTooLarge, s.name, s.maxBytes)
	}
	if keepalive {
		// The keepalive bytes are no part of the document; a held answer
		// that is nothing but keepalive is "unchanged", its 304
		// (proto/control-plane.md "Keepalive").
		data = bytes.TrimLeft(data, keepaliveBytes)
		if len(data) == 0 {
			if s.etag == "" {
				return nil, false, fmt.Errorf("snapshot: GET %s: a held answer with no document to an unconditional request", s.name)
			}
			s.held = true
			return nil, false, nil
		}
	}
	s.held = held
	sum := sha256.Sum256(data)
	if s.known && sum == s.sum {
		return nil, false, nil
	}
	s.known, s.sum = true, sum
	return data, true, nil
}

// Held implements [LongPoller]: the server held the last successful
// Fetch (it answered with Preference-Applied: wait=N), or the last Fetch
// asked for a wait and stalled ([ErrStalled]); either way the next poll
// may go at once.
func (s *HTTPSource) Held() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// applied reports whether a response says the server applied the
// preference named pref (RFC 7240 Preference-Applied: wait=N, keepalive=K).
func applied(h http.Header, pref string) bool {
	for _, v := range h.Values("Preference-Applied") {
		for p := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(name), pref) {
				return true
			}
		}
	}
	return false
}

// Hold implements [LongPoller]: whether later requests ask the server to
// hold them (?wait=, Prefer: wait). It is on until set; without LongPoll
// no request asks.
func (s *HTTPSource) Hold(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noHold = !on
}

// SetVersion implements [Versioner]: later requests carry
// If-None-Match: "<version>".
func (s *HTTPSource) SetVersion(version uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.etag = `"` + strconv.FormatUint(version, 10) + `"`
}

// Forget implements [Forgetter]: the next request is unconditional and its
// answer is reported as changed.
func (s *HTTPSource) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.etag, s.known = "", false
}

// CloseIdleConnections closes the source's idle keep-alive connections.
// The poller calls it when it stops.
func (s *HTTPSource) CloseIdleConnections() { s.client.CloseIdleConnections() }

// String returns the URL without user info, query or fragment.
func (s *HTTPSource) String() string { return s.name }

// wrap names the source in a request error. net/http's *url.Error would
// quote the whole request URL, query included; it is replaced by the
// redacted name.
func (s *HTTPSource) wrap(err error) error {
	return fmt.Errorf("snapshot: GET %s: %w", s.name, unwrapURLError(err))
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// IsLoopback reports whether host is "localhost" or a loopback IP literal
// (127.0.0.0/8, ::1). No name is resolved: only what is written counts.
func IsLoopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
