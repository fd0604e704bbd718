package egress

// Tests through the real Debian proxies started by scripts/ci-daemons.sh:
// danted (dante-server 1.4, SOCKS5) and tinyproxy 1.11 (HTTP CONNECT).
// Without the environment they skip loudly, or fail under
// SCOOTGATE_REQUIRE_DAEMONS=1 (CI).

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/secret"
)

// daemonEnv returns the value of name or skips (fails when daemons are
// required).
func daemonEnv(t *testing.T, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := fmt.Sprintf("%s is unset: real proxy daemon tests NOT RUN; "+
		`start them with: env=$(scripts/ci-daemons.sh) && eval "$env" (root, Debian 12)`, name)
	if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
		t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
	}
	t.Skip("SKIP: " + msg)
	return ""
}

// danteProxy is the configured danted (SOCKS5, no auth).
func danteProxy(t *testing.T) Proxy {
	t.Helper()
	return Proxy{Name: "dante", URL: mustURL(t, "socks5://"+daemonEnv(t, "SCOOTGATE_DANTE_ADDR"))}
}

// tinyproxyProxy is the configured tinyproxy with its credentials moved out
// of the URL into Username/Password; password overrides them when set.
func tinyproxyProxy(t *testing.T, password string) Proxy {
	t.Helper()
	u := mustURL(t, daemonEnv(t, "SCOOTGATE_TINYPROXY_URL"))
	p := Proxy{Name: "tinyproxy", URL: mustURL(t, u.Scheme+"://"+u.Host)}
	if u.User != nil {
		p.Username = u.User.Username()
		pw, _ := u.User.Password()
		p.Password = pass(pw)
	}
	if password != "" {
		p.Password = pass(password)
	}
	return p
}

func TestDaemonRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		proxy func(t *testing.T) Proxy
	}{
		{"dante", danteProxy},
		{"tinyproxy", func(t *testing.T) Proxy { return tinyproxyProxy(t, "") }},
	}
	for _, tt := range tests {
		for _, withTLS := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tls=%v", tt.name, withTLS), func(t *testing.T) {
				p := tt.proxy(t)
				tg := newTarget(t, withTLS)
				d := newDialer(t, Options{Proxies: []Proxy{p}, ProviderCAs: tg.pool()})
				resp, body, err := get(t, d, tg.URL+"/")
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					Status, Body string
					TLS          bool
					Requests     int64
				}
				got := result{resp.Status, body, resp.TLS != nil, tg.requests.Load()}
				if diff := cmp.Diff(got, result{"200 OK", "ok", withTLS, 1}); diff != "" {
					t.Errorf("(-got +want):\n%s", diff)
				}
			})
		}
	}
}

func TestDaemonNotSent(t *testing.T) {
	type want struct {
		Stage       Stage
		EgressFault bool
		StatusCode  int // CONNECT status, 0 if none
		SOCKSCode   int // SOCKS5 reply code, 0 if none
		TargetConns int64
	}
	tests := []struct {
		name   string
		proxy  func(t *testing.T) Proxy
		target func(t *testing.T, tg *target) string // URL; default tg.URL
		want   want
	}{
		{
			name:  "tinyproxy wrong password (401)",
			proxy: func(t *testing.T) Proxy { return tinyproxyProxy(t, tinyWrongPass) },
			want:  want{Stage: StageProxyAuth, EgressFault: true, StatusCode: 401},
		},
		{
			name: "tinyproxy no credentials (407)",
			proxy: func(t *testing.T) Proxy {
				p := tinyproxyProxy(t, "")
				p.Username, p.Password = "", secret.Secret{}
				return p
			},
			want: want{Stage: StageProxyAuth, EgressFault: true, StatusCode: 407},
		},
		{
			name:   "tinyproxy target refused (500)",
			proxy:  func(t *testing.T) Proxy { return tinyproxyProxy(t, "") },
			target: func(t *testing.T, _ *target) string { return "https://" + deadAddr(t) + "/" },
			want:   want{Stage: StageTarget, StatusCode: 500},
		},
		{
			name:   "dante target refused",
			proxy:  danteProxy,
			target: func(t *testing.T, _ *target) string { return "https://" + deadAddr(t) + "/" },
			want:   want{Stage: StageTarget, SOCKSCode: 5},
		},
		{
			name:  "dante ruleset",
			proxy: danteProxy,
			target: func(t *testing.T, _ *target) string {
				return "http://" + net.JoinHostPort("127.0.0.1", daemonEnv(t, "SCOOTGATE_DANTE_DENIED_PORT")) + "/"
			},
			want: want{Stage: StageProxyPolicy, EgressFault: true, SOCKSCode: 2},
		},
		{
			name:  "dante untrusted provider certificate",
			proxy: danteProxy,
			want:  want{Stage: StageProviderTLS, TargetConns: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.proxy(t)
			tg := newTarget(t, true)
			u := tg.URL + "/"
			if tt.target != nil {
				u = tt.target(t, tg)
			}
			cas := tg.pool()
			if tt.want.Stage == StageProviderTLS {
				cas = nil // system pool: the httptest certificate is untrusted
			}
			d := newDialer(t, Options{Proxies: []Proxy{p}, ProviderCAs: cas})
			_, _, err := get(t, d, u)
			if err == nil {
				t.Fatal("request succeeded, want a NotSentError")
			}
			assertNoSecrets(t, err)
			nse := notSent(t, err)
			got := want{Stage: nse.Stage, EgressFault: nse.EgressFault(), TargetConns: tg.conns.Load()}
			var cse *connectStatusError
			if errors.As(err, &cse) {
				got.StatusCode = cse.code
			}
			var sre *socksReplyError
			if errors.As(err, &sre) {
				got.SOCKSCode = int(sre.code)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("error %q (-got +want):\n%s", err, diff)
			}
		})
	}
}

// TestDaemonFailover: a dead proxy first, then the real one.
func TestDaemonFailover(t *testing.T) {
	for _, real := range []func(t *testing.T) Proxy{danteProxy, func(t *testing.T) Proxy { return tinyproxyProxy(t, "") }} {
		p := real(t)
		tg := newTarget(t, true)
		d := newDialer(t, Options{
			Proxies:     []Proxy{{Name: "dead", URL: mustURL(t, "socks5://"+deadAddr(t))}, p},
			ProviderCAs: tg.pool(),
		})
		if _, _, err := get(t, d, tg.URL+"/"); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if got := tg.requests.Load(); got != 1 {
			t.Errorf("%s: target saw %d requests, want 1", p.Name, got)
		}
	}
}
