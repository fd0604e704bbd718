package faketoken_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/oauth2/jwt"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
)

// TestMain fails the package's tests when a goroutine is still running
// after the last test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var keys = sync.OnceValue(func() [2]*rsa.PrivateKey {
	var ks [2]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

// serve starts h on a TLS test server and returns it and a context whose
// oauth2 HTTP client trusts it.
func serve(t *testing.T, h http.Handler) (*httptest.Server, context.Context) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)
	return srv, context.WithValue(t.Context(), oauth2.HTTPClient, srv.Client())
}

// refusal is an OAuth 2 error answer.
type refusal struct {
	Status int
	Code   string
	Desc   string
}

func refused(t *testing.T, err error) refusal {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		t.Fatalf("want a refusal, got %v", err)
	}
	var body struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(re.Body, &body); err != nil {
		t.Fatalf("refusal body %q: %v", re.Body, err)
	}
	return refusal{re.Response.StatusCode, body.Error, body.Description}
}

func TestGoogle(t *testing.T) {
	clk := clock.NewFake(time.Now()) // assertions are dated by the process clock
	g, err := faketoken.NewGoogle(faketoken.GoogleOptions{
		Options: faketoken.Options{Now: clk.Now, Lifetime: 2 * time.Minute},
		Key:     keys()[0],
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, ctx := serve(t, g)
	tokenURL := srv.URL + "/token"
	var key map[string]string
	if err := json.Unmarshal(g.KeyJSON(tokenURL), &key); err != nil {
		t.Fatal(err)
	}
	if key["type"] != "service_account" || key["token_uri"] != tokenURL || key["client_email"] != faketoken.DemoServiceAccount {
		t.Fatalf("key file: type %q, token_uri %q, client_email %q", key["type"], key["token_uri"], key["client_email"])
	}
	good := func() *jwt.Config {
		return &jwt.Config{
			Email: key["client_email"], PrivateKey: []byte(key["private_key"]), PrivateKeyID: key["private_key_id"],
			Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}, TokenURL: tokenURL,
		}
	}

	tok, err := good().TokenSource(ctx).Token()
	if err != nil {
		t.Fatal(err)
	}
	if !g.Live(tok.AccessToken) || tok.TokenType != "Bearer" || tok.Extra("expires_in") != float64(120) {
		t.Fatalf("token type %q, expires_in %v: want a live Bearer token for 120 s", tok.TokenType, tok.Extra("expires_in"))
	}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	if !g.Authorized(r) {
		t.Fatal("Authorized refused a live token")
	}
	if g.Live("ya29.fake-unknown") {
		t.Fatal("an unknown token is live")
	}

	otherKey := func() *jwt.Config {
		c := good()
		og, err := faketoken.NewGoogle(faketoken.GoogleOptions{Key: keys()[1]})
		if err != nil {
			t.Fatal(err)
		}
		var om map[string]string
		if err := json.Unmarshal(og.KeyJSON(tokenURL), &om); err != nil {
			t.Fatal(err)
		}
		c.PrivateKey = []byte(om["private_key"]) // same key id, another key
		return c
	}
	badSig := refusal{400, "invalid_grant", "Invalid JWT Signature."}
	tests := []struct {
		name string
		cfg  func() *jwt.Config
		want refusal
	}{
		{"signed by another key", otherKey, badSig},
		{"another key id", func() *jwt.Config { c := good(); c.PrivateKeyID = "other"; return c }, badSig},
		{"another account", func() *jwt.Config { c := good(); c.Email = "x@example.iam.gserviceaccount.com"; return c },
			refusal{400, "invalid_grant", "Invalid email or User ID"}},
		{"another audience", func() *jwt.Config { c := good(); c.Audience = "https://oauth2.googleapis.com/token"; return c },
			refusal{400, "invalid_grant", "Invalid JWT: Failed audience check."}},
		{"no scope", func() *jwt.Config { c := good(); c.Scopes = nil; return c },
			refusal{400, "invalid_scope", "Empty or missing scope not allowed."}},
		{"assertion for two hours", func() *jwt.Config { c := good(); c.Expires = 2 * time.Hour; return c },
			refusal{400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg().TokenSource(ctx).Token()
			if diff := cmp.Diff(refused(t, err), tt.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}

	t.Run("expired assertion", func(t *testing.T) {
		clk.Advance(2 * time.Hour)
		defer clk.Advance(-2 * time.Hour)
		_, err := good().TokenSource(ctx).Token()
		if got := refused(t, err); got.Code != "invalid_grant" || !strings.Contains(got.Desc, "short-lived") {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("wrong grant type", func(t *testing.T) {
		resp, err := srv.Client().PostForm(tokenURL, url.Values{"grant_type": {"client_credentials"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
	t.Run("failing", func(t *testing.T) {
		g.Fail(http.StatusServiceUnavailable)
		defer g.Fail(0)
		_, err := good().TokenSource(ctx).Token()
		if got := refused(t, err); got.Status != 503 || got.Code != "temporarily_unavailable" {
			t.Errorf("got %+v", got)
		}
	})

	if n := g.Grants(); n != 1 {
		t.Fatalf("Grants() = %d; want 1", n)
	}
	clk.Advance(2*time.Minute - time.Nanosecond)
	if !g.Live(tok.AccessToken) {
		t.Fatal("the token died before its lifetime")
	}
	clk.Advance(time.Nanosecond)
	if g.Live(tok.AccessToken) || g.Authorized(r) {
		t.Fatal("the token outlived its lifetime")
	}
}

func TestEntra(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	const (
		tenant = "contoso.onmicrosoft.com"
		client = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
		secret = "s3cr3t~value"
	)
	e := faketoken.NewEntra(faketoken.EntraOptions{
		Options: faketoken.Options{Now: clk.Now, Lifetime: time.Hour},
		Tenant:  tenant, ClientID: client, ClientSecret: secret,
	})
	srv, ctx := serve(t, e)
	good := func() *clientcredentials.Config {
		return &clientcredentials.Config{
			ClientID: client, ClientSecret: secret, TokenURL: srv.URL + "/" + tenant + "/oauth2/v2.0/token",
			Scopes: []string{faketoken.EntraScope}, AuthStyle: oauth2.AuthStyleInParams,
		}
	}
	tok, err := good().Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Live(tok.AccessToken) || tok.Extra("expires_in") != float64(3600) || tok.Extra("ext_expires_in") != float64(3600) {
		t.Fatalf("want a live token for an hour; expires_in %v", tok.Extra("expires_in"))
	}
	tests := []struct {
		name string
		cfg  func(c *clientcredentials.Config)
		want refusal
	}{
		{"wrong secret", func(c *clientcredentials.Config) { c.ClientSecret = "wrong" },
			refusal{401, "invalid_client", "AADSTS7000215: Invalid client secret provided."}},
		{"credentials in a basic header", func(c *clientcredentials.Config) { c.AuthStyle = oauth2.AuthStyleInHeader },
			refusal{400, "unauthorized_client", "AADSTS700016: Application was not found in the directory."}},
		{"wrong client", func(c *clientcredentials.Config) { c.ClientID = "00000000-0000-0000-0000-000000000000" },
			refusal{400, "unauthorized_client", "AADSTS700016: Application was not found in the directory."}},
		{"wrong tenant", func(c *clientcredentials.Config) { c.TokenURL = srv.URL + "/other/oauth2/v2.0/token" },
			refusal{400, "invalid_request", "AADSTS90002: Tenant not found."}},
		{"wrong scope", func(c *clientcredentials.Config) { c.Scopes = []string{"https://graph.microsoft.com/.default"} },
			refusal{400, "invalid_scope", "AADSTS70011: The provided value for the input parameter 'scope' is not valid."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.cfg(c)
			_, err := c.Token(ctx)
			if diff := cmp.Diff(refused(t, err), tt.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
	if n := e.Grants(); n != 1 {
		t.Fatalf("Grants() = %d; want 1", n)
	}
	clk.Advance(time.Hour)
	if e.Live(tok.AccessToken) {
		t.Fatal("the token outlived its lifetime")
	}
}
