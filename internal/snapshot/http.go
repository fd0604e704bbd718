package snapshot

import (
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
	// wait=<whole seconds> to the query (and sending "Prefer: wait=<same>",
	// RFC 7240). Each request may then take LongPoll + Timeout. A server
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
	url      string // request URL, including wait= for long polls
	plainURL string // request URL without wait=
	token    secret.Secret
	timeout  time.Duration // per request, including LongPoll
	longPoll time.Duration
	stall    time.Duration
	maxBytes int64
	wait     string // "wait=N" for the Prefer header; "" without long poll
	client   *http.Client

	mu    sync.Mutex // serializes Fetch and guards the fields below
	etag  string     // If-None-Match to send; "" = unconditional
	known bool       // sum is the hash of the last document returned
	sum   [sha256.Size]byte
	held  bool // the server held the last request (Preference-Applied: wait)
	// noHold: requests ask for no wait ([LongPoller] Hold).
	noHold bool
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
	req := *u
	req.Scheme = scheme
	plain := req.String()
	wait := ""
	if o.LongPoll > 0 {
		wait = "wait=" + strconv.FormatInt(int64(max(o.LongPoll/time.Second, 1)), 10)
		if req.RawQuery == "" {
			req.RawQuery = wait
		} else {
			req.RawQuery += "&" + wait
		}
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
		url:      req.String(),
		plainURL: plain,
		token:    o.Token,
		timeout:  o.Timeout + max(o.LongPoll, 0),
		longPoll: max(o.LongPoll, 0),
		stall:    o.Stall,
		maxBytes: o.MaxBytes,
		wait:     wait,
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
	wait, url := s.wait, s.url
	if s.noHold {
		wait, url = "", s.plainURL
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	limit := s.stall
	if wait != "" {
		limit += s.longPoll
	}
	watch := &watchdog{stall: s.stall, t: time.AfterFunc(limit, func() { stop(errNoProgress) })}
	defer watch.t.Stop()
	data, changed, err := s.fetch(ctx, url, wait, watch)
	if err != nil && errors.Is(context.Cause(ctx), errNoProgress) {
		s.held = wait != "" // ask again at once, once ([LongPoller])
		return nil, false, fmt.Errorf("%w: GET %s: no progress within %s", ErrStalled, s.name, limit)
	}
	return data, changed, err
}

// errNoProgress is the cause of a request the watchdog ended.
var errNoProgress = errors.New("no progress")

// watchdog ends a request that makes no progress: it is armed for the
// headers, then re-armed for Stall whenever minProgress bytes of the body
// came in.
type watchdog struct {
	stall time.Duration
	t     *time.Timer
	got   int // body bytes since the last re-arm
}

func (w *watchdog) headers() { w.t.Reset(w.stall) }

// watchedBody reports a body's progress to its watchdog.
type watchedBody struct {
	r io.Reader
	w *watchdog
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.w.got += n; b.w.got >= minProgress {
		b.w.got = 0
		b.w.t.Reset(b.w.stall)
	}
	return n, err
}

// fetch is one request of Fetch to url, with wait (the Prefer value; ""
// for none), reporting its progress to watch. s.mu is held.
func (s *HTTPSource) fetch(ctx context.Context, url, wait string, watch *watchdog) ([]byte, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
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
	if wait != "" {
		req.Header.Set("Prefer", wait)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, false, s.wrap(err)
	}
	defer resp.Body.Close()
	watch.headers()
	held := wait != "" && waitApplied(resp.Header)

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

// waitApplied reports whether a response says the server applied the
// wait preference (RFC 7240 Preference-Applied: wait=N).
func waitApplied(h http.Header) bool {
	for _, v := range h.Values("Preference-Applied") {
		for p := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(name), "wait") {
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
