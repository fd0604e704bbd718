// Package faketoken stands in for the token endpoints the node's
// minted-token credentials use: Google's (the JWT bearer grant signed
// with a service-account key), Microsoft Entra ID's (the client
// credentials grant) and AWS STS (AssumeRoleWithWebIdentity). It is a dev/test tool only and is never imported by
// cmd/scootgate or internal/app.
//
// # Basics
//
// [NewGoogle] makes a demo service account (a fresh RSA key, never a real
// one) and serves its token endpoint: [Google.KeyJSON] is the key file to
// give the node. A grant is answered only when its assertion's RS256
// signature verifies against the demo key, and its issuer, audience,
// scope and lifetime are what Google requires; refusals have Google's
// shape ({"error":"invalid_grant","error_description":"Invalid JWT
// Signature."}). [NewEntra] serves an Entra tenant's
// /{tenant}/oauth2/v2.0/token for one application id and secret, and
// refuses others as Entra does (401 invalid_client with AADSTS7000215 for
// a wrong secret).
//
// [NewSTS] serves AWS STS's AssumeRoleWithWebIdentity for one role and
// web identity token, issuing fixed temporary keys (the ones a fake
// Bedrock accepts) that expire Options.Lifetime after the grant.
//
// Google and Entra issue random short-lived bearer tokens (Options.Lifetime) and
// remember them: [Issuer.Live] and [Issuer.Authorized] tell a fake
// provider whether a request carries a token that is live now, by the
// Issuer's clock. [Issuer.Fail] makes every grant fail with a status, to
// test a failing token endpoint; [Issuer.Grants] counts the tokens
// issued.
//
// # Caveats
//
// The signature check is written here with the standard library on
// purpose: it is the oracle for the node's use of golang.org/x/oauth2,
// so it does not share that package's code.
package faketoken

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultLifetime is the expires_in of issued tokens when
// Options.Lifetime is 0: short, so `make run` shows refreshes.
const DefaultLifetime = 10 * time.Minute

// Options are what both endpoints share.
type Options struct {
	// Now is the endpoint's clock, for the assertion's times and the
	// tokens' liveness; nil = time.Now.
	Now func() time.Time
	// Lifetime is the expires_in of issued tokens; 0 = DefaultLifetime.
	Lifetime time.Duration
}

// Issuer issues tokens and remembers which are live. Safe for concurrent
// use.
type Issuer struct {
	// immutable
	prefix   string
	now      func() time.Time
	lifetime time.Duration

	mu     sync.Mutex
	live   map[string]time.Time // token → expiry; guarded by mu
	grants int                  // guarded by mu
	fail   int                  // status every grant answers; 0 = none; guarded by mu
}

func newIssuer(prefix string, o Options) *Issuer {
	is := &Issuer{prefix: prefix, now: o.Now, lifetime: o.Lifetime, live: map[string]time.Time{}}
	if is.now == nil {
		is.now = time.Now
	}
	if is.lifetime <= 0 {
		is.lifetime = DefaultLifetime
	}
	return is
}

// Live reports whether token was issued here and has not expired.
func (is *Issuer) Live(token string) bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	exp, ok := is.live[token]
	return ok && is.now().Before(exp)
}

// Authorized reports whether r carries "Authorization: Bearer <token>"
// with a live token.
func (is *Issuer) Authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "bearer") && is.Live(token)
}

// Grants returns how many tokens were issued.
func (is *Issuer) Grants() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.grants
}

// Fail makes every grant answer status (with an OAuth 2
// "temporarily_unavailable" error) until Fail(0).
func (is *Issuer) Fail(status int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.fail = status
}

// failing answers the grant when Fail is in force.
func (is *Issuer) failing(w http.ResponseWriter) bool {
	is.mu.Lock()
	status := is.fail
	is.mu.Unlock()
	if status == 0 {
		return false
	}
	refuse(w, status, "temporarily_unavailable", "the fake token endpoint is failing on purpose")
	return true
}

// issue answers a grant with a new token.
func (is *Issuer) issue(w http.ResponseWriter, extra map[string]any) {
	token := is.prefix + rand.Text()
	now := is.now()
	is.mu.Lock()
	for t, exp := range is.live {
		if !now.Before(exp) {
			delete(is.live, t)
		}
	}
	is.live[token] = now.Add(is.lifetime)
	is.grants++
	is.mu.Unlock()
	secs := int64(is.lifetime / time.Second)
	body := map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": secs}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(w, http.StatusOK, body)
}

// refuse answers an OAuth 2 error (RFC 6749 section 5.2).
func refuse(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// form reads a grant's form body, answering 400 when it is not one.
func form(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		refuse(w, http.StatusMethodNotAllowed, "invalid_request", "a grant is a POST")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		refuse(w, http.StatusBadRequest, "invalid_request", "a grant is an application/x-www-form-urlencoded body")
		return false
	}
	return true
}
