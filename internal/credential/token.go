package credential

// Minted tokens: credential kinds whose value is a short-lived access token
// the node obtains from a token endpoint (docs/egress.md "Minted-token
// credentials"). The grant itself is golang.org/x/oauth2's; this file is
// the cache in front of it, the refresh rule, the failure state and the
// fence that keeps the grant on the egress path and inside the
// credential's hosts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"

	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// The refresh rule (docs/egress.md "Minted-token credentials").
const (
	// RefreshWindow is how long before its expiry a token is replaced: from
	// then on the first caller starts one grant in the background and
	// every caller keeps getting the current token meanwhile. A token that
	// lives less than twice as long is replaced halfway through its life.
	RefreshWindow = 5 * time.Minute
	// ExpiryMargin: a token is not handed out in its last 10 seconds, so
	// it does not expire between the node handing it out and the provider
	// checking it (clock skew, a slow proxy).
	ExpiryMargin = 10 * time.Second
	// MinTokenLifetime is the shortest expires_in accepted from a token
	// endpoint; a shorter one is a failed grant.
	MinTokenLifetime = 3 * ExpiryMargin
	// BackoffMin and BackoffMax bound the wait after a failed grant before
	// the next: it starts at BackoffMin and doubles with each failure in a
	// row up to BackoffMax. Meanwhile callers get the valid token, or,
	// when there is none, fail at once without a grant.
	BackoffMin = time.Second
	BackoffMax = time.Minute
	// DefaultGrantTimeout bounds one grant when TokenOptions.Timeout is 0.
	DefaultGrantTimeout = 30 * time.Second
	// DefaultCheckEvery is how often Run looks whether a grant is due
	// when TokenOptions.CheckEvery is 0.
	DefaultCheckEvery = 15 * time.Second
)

// ErrNoToken is wrapped by Token's error when the credential has no token
// it may hand out: none was obtained yet, or the last one expired, and the
// grant failed (the error wraps its reason too) or is held back by the
// backoff. A backend that uses the credential is unusable until a grant
// succeeds, which happens on its own: the next Token call or Run tick
// after the backoff tries again.
var ErrNoToken = errors.New("no valid token")

// TokenOptions are what every minted-token kind shares.
type TokenOptions struct {
	// Name is the credential's name, quoted in errors, logs and Status.
	Name string
	// Hosts are the credential's host patterns, each in the form ParseHost
	// returns: the token endpoint's host must match one of them, like a
	// backend's (docs/egress.md "Where a credential may go").
	Hosts []string
	// Transport reaches the token endpoint: the node's egress transport
	// (egress.Dialer.Transport), so a grant goes through the egress
	// proxies like a provider request. Required: there is no direct
	// connection.
	Transport http.RoundTripper
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Logger gets a line per failed grant and one when grants work again;
	// nil = discard.
	Logger *slog.Logger
	// Timeout bounds one grant; 0 = DefaultGrantTimeout.
	Timeout time.Duration
	// CheckEvery is how often Run looks whether a grant is due; 0 =
	// DefaultCheckEvery.
	CheckEvery time.Duration
}

// kind is what a minted-token credential kind knows: how to ask its token
// endpoint for a token.
type kind interface {
	// name is the kind's config name ("gcp_service_account").
	name() string
	// prepare reads the credential's current material (a key file may
	// have been rotated since the last grant) and returns the token
	// endpoint's URL and the function that asks it for one token with hc.
	// Its errors are the node's own and never quote the material.
	prepare() (tokenURL string, mint func(ctx context.Context, hc *http.Client) (*oauth2.Token, error), err error)
	// detail returns what of a refusal's error_description may be shown
	// (an error number the vendor documents), or "".
	detail(description string) string
}

// TokenSource is a minted-token credential: it hands out a bearer access
// token obtained from the kind's token endpoint and replaces it ahead of
// expiry. It is safe for concurrent use.
//
// # Refresh
//
// Token returns the cached token without blocking while it is fresh. From
// RefreshWindow before its expiry, the first caller starts one grant in
// the background (one flight per credential: never one per request, never
// one per caller at expiry) and every caller keeps getting the cached
// token until the new one replaces it. Only a caller that finds no token
// it may hand out (the first call, or after expiry) waits, for that same
// single grant. Run does the same on a timer, so an idle credential stays
// fresh and a failed one recovers without traffic.
//
// # Failure
//
// A failed grant keeps the valid token until ExpiryMargin before it
// expires; the next grant waits for the backoff (BackoffMin doubling to
// BackoffMax). Once no token may be handed out, Token fails at once with
// ErrNoToken and the last grant's reason, and Status says so, until a
// grant succeeds. Errors, logs, Status and the TokenSource's own printed
// forms never contain a token or key material: a refusal is reported by
// its status, OAuth 2 error code and documented vendor error number
// (GrantError), never by the endpoint's free text.
type TokenSource struct {
	// immutable
	credName string
	kind     kind
	hosts    Credential // only Hosts is set
	base     http.RoundTripper
	now      func() time.Time
	log      *slog.Logger
	timeout  time.Duration
	every    time.Duration

	// current is the token to hand out; nil before the first grant. It is
	// replaced whole, under mu, so the fresh path is one atomic load.
	current atomic.Pointer[minted]

	mu sync.Mutex
	// guarded by mu
	flight       *flight   // the grant in flight; nil when none
	failures     int       // failed grants in a row
	failingSince time.Time // start of the first of them; zero when none
	lastErr      error     // the last failed grant's reason
	retryAt      time.Time // no grant before this (backoff)
	closed       bool

	wg sync.WaitGroup // grant goroutines
}

// minted is one token and the times that govern it, as the node's clock
// reckons them. Immutable.
type minted struct {
	value       secret.Secret
	expiry      time.Time // the grant's start plus expires_in
	refreshAt   time.Time // from here a grant is due
	usableUntil time.Time // expiry - ExpiryMargin
}

// flight is one grant. err is written before done is closed.
type flight struct {
	done   chan struct{}
	cancel context.CancelFunc
	err    error
}

func newTokenSource(k kind, o TokenOptions) (*TokenSource, error) {
	if o.Transport == nil {
		return nil, fmt.Errorf("credential %q: no transport for the token endpoint (it is reached through the egress proxies; there is no direct connection)", o.Name)
	}
	if o.Timeout < 0 || o.CheckEvery < 0 {
		return nil, fmt.Errorf("credential %q: negative grant timeout or check interval", o.Name)
	}
	s := &TokenSource{
		credName: o.Name,
		kind:     k,
		hosts:    Credential{Hosts: o.Hosts},
		base:     o.Transport,
		now:      o.Now,
		log:      o.Logger,
		timeout:  o.Timeout,
		every:    o.CheckEvery,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout == 0 {
		s.timeout = DefaultGrantTimeout
	}
	if s.every == 0 {
		s.every = DefaultCheckEvery
	}
	tokenURL, _, err := k.prepare()
	if err != nil {
		return nil, fmt.Errorf("credential %q: %w", o.Name, err)
	}
	if err := s.checkURL(tokenURL); err != nil {
		return nil, fmt.Errorf("credential %q: %w", o.Name, err)
	}
	return s, nil
}

// checkURL refuses a token endpoint the credential may not be sent to:
// a URL no base_url could be (a metadata or link-local address among
// others, routesnap.CheckBaseURL), not https://, or a host its hosts list
// does not name. The message quotes the host, never the URL's other parts.
func (s *TokenSource) checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return errors.New("token endpoint URL is not an absolute https:// URL without userinfo")
	}
	if e := routesnap.CheckBaseURL(raw); e != nil {
		return fmt.Errorf("token endpoint URL: %s", e.Msg)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("token endpoint %s is not https:// (a grant carries the credential)", Host(u.Hostname()))
	}
	if !s.hosts.Allows(u.Hostname()) {
		return fmt.Errorf("token endpoint host %q is not in %s: the token endpoint is egress like the provider, list its host there",
			Host(u.Hostname()), HostsKey(s.credName))
	}
	return nil
}

// Token returns the token to send, as the value of "Authorization: Bearer".
// It does not block while a fresh token is cached; see the type's doc for
// when it waits and when it fails. ctx bounds only the wait: a grant this
// call starts outlives it (up to the grant timeout), so a client that goes
// away never wastes a grant the next one needs.
func (s *TokenSource) Token(ctx context.Context) (secret.Secret, error) {
	now := s.now()
	if m := s.current.Load(); m != nil && now.Before(m.refreshAt) {
		return m.value, nil
	}
	s.mu.Lock()
	m := s.current.Load()
	if s.dueLocked(now, m) {
		s.startLocked(ctx)
	}
	f := s.flight
	if m != nil && now.Before(m.usableUntil) {
		s.mu.Unlock()
		return m.value, nil // a grant replaces it in the background
	}
	if f == nil {
		err := s.noTokenLocked(now, m)
		s.mu.Unlock()
		return secret.Secret{}, err
	}
	s.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return secret.Secret{}, fmt.Errorf("credential %q: waiting for a token: %w", s.credName, context.Cause(ctx))
	}
	if f.err != nil {
		return secret.Secret{}, fmt.Errorf("credential %q: %w: %w", s.credName, ErrNoToken, f.err)
	}
	if m := s.current.Load(); m != nil && s.now().Before(m.usableUntil) {
		return m.value, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return secret.Secret{}, s.noTokenLocked(s.now(), s.current.Load())
}

// Run keeps the token fresh without waiting for requests: every
// CheckEvery it starts a grant when one is due (the first, one inside the
// refresh window, or a retry after the backoff), so an idle credential
// never hands a caller an expired token's wait and a failing one recovers
// on its own. It returns when ctx ends; Close stops a grant in flight.
func (s *TokenSource) Run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.mu.Lock()
		if s.dueLocked(s.now(), s.current.Load()) {
			s.startLocked(ctx)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close stops a grant in flight and waits for it; no grant starts after
// it. A token already held is still handed out until it expires.
func (s *TokenSource) Close() {
	s.mu.Lock()
	s.closed = true
	if s.flight != nil {
		s.flight.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// dueLocked reports whether a grant should start now: none is in flight,
// the backoff has passed, and there is no token or it is inside its
// refresh window. s.mu is held.
func (s *TokenSource) dueLocked(now time.Time, m *minted) bool {
	return s.flight == nil && !s.closed && !now.Before(s.retryAt) &&
		(m == nil || !now.Before(m.refreshAt))
}

// startLocked starts a grant in a goroutine s owns. The grant's context
// keeps ctx's values but not its cancellation: it ends at the grant
// timeout or at Close. s.mu is held.
func (s *TokenSource) startLocked(ctx context.Context) {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	f := &flight{done: make(chan struct{}), cancel: cancel}
	s.flight = f
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.refresh(gctx, f)
	}()
}

// refresh runs one grant, records its outcome and logs it, then lets the
// callers waiting for it go (so a caller sees the log line of the grant
// it waited for).
func (s *TokenSource) refresh(ctx context.Context, f *flight) {
	defer close(f.done)
	start := s.now()
	value, life, err := s.grant(ctx)
	s.mu.Lock()
	now := s.now()
	prevFailures, since := s.failures, s.failingSince
	if err == nil {
		s.current.Store(newMinted(value, start, life))
		s.failures, s.failingSince, s.lastErr, s.retryAt = 0, time.Time{}, nil, time.Time{}
	} else {
		s.failures++
		if s.failingSince.IsZero() {
			s.failingSince = start
		}
		s.lastErr = err
		s.retryAt = now.Add(backoff(s.failures))
	}
	failures, retryAt, cur := s.failures, s.retryAt, s.current.Load()
	if err != nil {
		since = s.failingSince
	}
	s.flight = nil
	f.err = err
	s.mu.Unlock()

	attrs := []any{"credential", s.credName, "kind", s.kind.name()}
	switch {
	case err != nil:
		valid := "none"
		if cur != nil && now.Before(cur.usableUntil) {
			valid = cur.usableUntil.UTC().Format(time.RFC3339)
		}
		s.log.Warn("credential token grant failed", append(attrs, "failures", failures,
			"failing_since", since.UTC(), "token_valid_until", valid, "next_attempt", retryAt.UTC(), "err", err)...)
	case prevFailures > 0:
		s.log.Info("credential token grant works again", append(attrs, "failures", prevFailures,
			"failing_since", since.UTC(), "expires", cur.expiry.UTC())...)
	default:
		s.log.Debug("credential token granted", append(attrs, "expires", cur.expiry.UTC())...)
	}
}

// newMinted dates a token granted at start for life.
func newMinted(value secret.Secret, start time.Time, life time.Duration) *minted {
	expiry := start.Add(life)
	return &minted{
		value:       value,
		expiry:      expiry,
		refreshAt:   expiry.Add(-min(RefreshWindow, life/2)),
		usableUntil: expiry.Add(-ExpiryMargin),
	}
}

// backoff is the wait after the n-th failed grant in a row (n ≥ 1).
func backoff(n int) time.Duration {
	d := BackoffMin
	for i := 1; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}

// noTokenLocked is Token's error when there is no token to hand out and
// no grant to wait for. s.mu is held.
func (s *TokenSource) noTokenLocked(now time.Time, m *minted) error {
	var why strings.Builder
	switch {
	case s.closed:
		why.WriteString("the credential is closed")
	case m == nil:
		why.WriteString("none obtained yet")
	default:
		fmt.Fprintf(&why, "the last one expired at %s", m.expiry.UTC().Format(time.RFC3339))
	}
	if s.lastErr == nil {
		return fmt.Errorf("credential %q: %w: %s", s.credName, ErrNoToken, why.String())
	}
	fmt.Fprintf(&why, "; %d grants failed since %s, next after %s",
		s.failures, s.failingSince.UTC().Format(time.RFC3339), s.retryAt.UTC().Format(time.RFC3339))
	return fmt.Errorf("credential %q: %w: %s: %w", s.credName, ErrNoToken, why.String(), s.lastErr)
}

// grant asks the token endpoint for a token through the egress transport,
// fenced by the credential's hosts.
func (s *TokenSource) grant(ctx context.Context) (secret.Secret, time.Duration, error) {
	tokenURL, mint, err := s.kind.prepare()
	if err != nil {
		return secret.Secret{}, 0, err
	}
	if err := s.checkURL(tokenURL); err != nil {
		return secret.Secret{}, 0, err
	}
	x := &exchange{ctx: ctx, base: s.base, hosts: s.hosts}
	hc := &http.Client{
		Transport: x,
		// A redirect would take the grant, and the credential in it, to
		// a URL nobody checked: the 3xx answer is the grant's failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		// x/oauth2/jwt posts without the context; the exchange puts it
		// back, and this bounds the grant even so.
		Timeout: s.timeout,
	}
	tok, err := mint(ctx, hc)
	if err != nil {
		return secret.Secret{}, 0, x.explain(ctx, err, s.kind.detail)
	}
	return accept(tok, x.host)
}

// exchange is one grant's round tripper: the egress transport, refusing
// any request that is not https:// to one of the credential's hosts, and
// recording what happened so the grant's error can be told from the
// node's own facts instead of the library's text (which may quote the
// endpoint's answer). A grant is one request, made synchronously by the
// grant's goroutine: no lock.
type exchange struct {
	ctx   context.Context
	base  http.RoundTripper
	hosts Credential

	host   string // the token endpoint's host, as Host returns it
	status int    // its answer's status; 0 if none
	err    error  // the round trip's failure; nil if none
}

func (x *exchange) RoundTrip(r *http.Request) (*http.Response, error) {
	x.host = Host(r.URL.Hostname())
	if r.URL.Scheme != "https" || !x.hosts.Allows(r.URL.Hostname()) {
		if r.Body != nil {
			r.Body.Close()
		}
		x.err = fmt.Errorf("refused: not an https:// URL on one of the credential's hosts")
		return nil, x.err
	}
	resp, err := x.base.RoundTrip(r.WithContext(x.ctx))
	if err != nil {
		x.err = err
		return nil, err
	}
	x.status = resp.StatusCode
	return resp, nil
}

// explain turns a failed grant into an error that carries no material
// and no text from the endpoint.
func (x *exchange) explain(ctx context.Context, err error, detail func(string) string) error {
	var re *oauth2.RetrieveError
	switch {
	case x.err != nil:
		// The egress and net stacks' errors: proxy names, stages,
		// addresses, never a credential (egress.NotSentError).
		return fmt.Errorf("token endpoint %s: %w", x.host, x.err)
	case errors.As(err, &re) && re.Response != nil:
		return newGrantError(x.host, re, detail)
	case x.status != 0:
		return fmt.Errorf("token endpoint %s answered %d without a usable token", x.host, x.status)
	case ctx.Err() != nil:
		return fmt.Errorf("token grant: %w", context.Cause(ctx))
	default:
		return errors.New("token grant failed before reaching the token endpoint")
	}
}

// GrantError is a token endpoint's refusal to issue a token.
type GrantError struct {
	Host   string // the token endpoint's host
	Status int    // its HTTP status
	// Code is the OAuth 2 error code (RFC 6749 section 5.2:
	// "invalid_client", "invalid_grant"…); "" when the answer had none
	// that reads as one.
	Code string
	// Detail is the vendor's documented error number from the
	// description (Microsoft Entra's "AADSTS7000215"); "" otherwise. The
	// description itself is never kept: the node cannot vouch for what
	// an endpoint puts there.
	Detail string
}

func (e *GrantError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "token endpoint %s answered %d", e.Host, e.Status)
	if e.Status >= 300 && e.Status < 400 {
		b.WriteString(" (a redirect, which a grant does not follow)")
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Detail != "" {
		b.WriteString(" (" + e.Detail + ")")
	}
	return b.String()
}

func newGrantError(host string, re *oauth2.RetrieveError, detail func(string) string) *GrantError {
	code, desc := re.ErrorCode, re.ErrorDescription
	if code == "" {
		// x/oauth2/jwt leaves the answer unparsed.
		var body struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(re.Body, &body) == nil {
			code, desc = body.Error, body.Description
		}
	}
	e := &GrantError{Host: host, Status: re.Response.StatusCode, Code: plainWord(code, 64)}
	if desc != "" {
		e.Detail = plainWord(detail(desc), 32)
	}
	return e
}

// plainWord returns s when it is 1 to n letters, digits, '_', '-' or '.',
// and "" otherwise: what may be quoted from an endpoint's answer.
func plainWord(s string, n int) string {
	if s == "" || len(s) > n {
		return ""
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return ""
		}
	}
	return s
}

// accept checks a granted token: a bearer token whose value a header can
// carry, and how long it lives.
func accept(tok *oauth2.Token, host string) (secret.Secret, time.Duration, error) {
	if t := tok.TokenType; t != "" && !strings.EqualFold(t, "bearer") {
		return secret.Secret{}, 0, fmt.Errorf("token endpoint %s issued a token of type %q, not a bearer token", host, plainWord(t, 32))
	}
	if !headerSafe(tok.AccessToken) {
		return secret.Secret{}, 0, fmt.Errorf("token endpoint %s issued an access token a header cannot carry", host)
	}
	life, ok := lifetime(tok)
	switch {
	case !ok:
		return secret.Secret{}, 0, fmt.Errorf("token endpoint %s issued a token without expires_in", host)
	case life < MinTokenLifetime:
		return secret.Secret{}, 0, fmt.Errorf("token endpoint %s issued a token that lives %s, under the %s minimum", host, life, MinTokenLifetime)
	}
	return secret.New(tok.AccessToken), life, nil
}

// lifetime is the token's expires_in. x/oauth2 dates a token by the
// process clock and, for JWT grants, keeps expires_in only among the raw
// members; the node dates it by its own (injected) clock.
func lifetime(tok *oauth2.Token) (time.Duration, bool) {
	secs := float64(tok.ExpiresIn)
	if secs == 0 {
		switch v := tok.Extra("expires_in").(type) {
		case float64:
			secs = v
		case string: // Entra's v1 endpoint
			secs, _ = strconv.ParseFloat(v, 64)
		}
	}
	if secs <= 0 || secs > 1e9 {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

// headerSafe reports whether v is a non-empty run of visible ASCII, as
// RFC 6750's b64token is.
func headerSafe(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range []byte(v) {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// TokenState is a minted-token credential's health, for a metric and the
// /readyz detail.
type TokenState uint8

const (
	// TokenPending: no token yet and no grant failed; the next Token call
	// or Run tick asks for one.
	TokenPending TokenState = iota
	// TokenOK: a token is held and the last grant worked.
	TokenOK
	// TokenRefreshFailing: a token is held, but grants to replace it have
	// failed since FailingSince. It works until it expires.
	TokenRefreshFailing
	// TokenExpired: no token may be handed out (the last one expired, or
	// none was ever obtained) and the last grant failed: the backends
	// that use the credential are unusable until a grant succeeds.
	TokenExpired
)

// String returns "pending", "ok", "refresh_failing" or "expired".
func (s TokenState) String() string {
	switch s {
	case TokenPending:
		return "pending"
	case TokenOK:
		return "ok"
	case TokenRefreshFailing:
		return "refresh_failing"
	case TokenExpired:
		return "expired"
	}
	return "unknown"
}

// TokenStatus is a snapshot of a TokenSource's state. It holds no token.
type TokenStatus struct {
	State TokenState
	// Expiry is the held token's expiry (zero when none was obtained).
	Expiry time.Time
	// Failures counts the failed grants in a row, the first of which
	// started at FailingSince (zero when the last grant worked).
	Failures     int
	FailingSince time.Time
	// Err is the last failed grant's reason; nil when the last worked.
	Err error
}

// Status returns the credential's state at the clock's now.
func (s *TokenSource) Status() TokenStatus {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := TokenStatus{Failures: s.failures, FailingSince: s.failingSince, Err: s.lastErr}
	m := s.current.Load()
	if m != nil {
		st.Expiry = m.expiry
	}
	switch valid := m != nil && now.Before(m.usableUntil); {
	case valid && s.failures == 0:
		st.State = TokenOK
	case valid:
		st.State = TokenRefreshFailing
	case s.failures > 0:
		st.State = TokenExpired
	default:
		st.State = TokenPending // expired unused, or never asked: the next call asks
	}
	return st
}

// Kind returns the credential kind's config name.
func (s *TokenSource) Kind() string { return s.kind.name() }

// String names the credential and its kind; it never prints a token or
// key material.
func (s *TokenSource) String() string {
	return "credential " + strconv.Quote(s.credName) + " (" + s.kind.name() + ")"
}

// GoString is String (fmt %#v).
func (s *TokenSource) GoString() string { return s.String() }

// Format makes every fmt verb print String, so no reflection over the
// fields (whose kind holds the key material) is ever printed.
func (s *TokenSource) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }
