package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
)

// tunnelCounter is what both in-process proxies expose.
type tunnelCounter interface {
	Connections() int64
	Tunnels() int64
}

func TestRoundTripThroughProxies(t *testing.T) {
	type proxyCase struct {
		name  string
		start func(t *testing.T) (Proxy, tunnelCounter)
	}
	proxies := []proxyCase{
		{"socks5 no auth", func(t *testing.T) (Proxy, tunnelCounter) {
			s, addr := startSOCKS(t, socks5proxy.Options{})
			return Proxy{Name: "socks", URL: mustURL(t, "socks5://"+addr)}, s
		}},
		{"socks5 user/pass", func(t *testing.T) (Proxy, tunnelCounter) {
			s, addr := startSOCKS(t, socks5proxy.Options{Username: proxyUser, Password: proxyPass})
			return Proxy{Name: "socks-auth", URL: mustURL(t, "socks5://"+addr), Username: proxyUser, Password: pass(proxyPass)}, s
		}},
		{"connect no auth", func(t *testing.T) (Proxy, tunnelCounter) {
			s, addr := startConnect(t, connectproxy.Options{})
			return Proxy{Name: "connect", URL: mustURL(t, "http://"+addr)}, s
		}},
		{"connect basic auth", func(t *testing.T) (Proxy, tunnelCounter) {
			s, addr := startConnect(t, connectproxy.Options{Username: proxyUser, Password: proxyPass})
			return Proxy{Name: "connect-auth", URL: mustURL(t, "http://"+addr), Username: proxyUser, Password: pass(proxyPass)}, s
		}},
		{"connect over tls", func(t *testing.T) (Proxy, tunnelCounter) {
			s, addr, pool := startConnectTLS(t, connectproxy.Options{Username: proxyUser, Password: proxyPass})
			return Proxy{Name: "connect-tls", URL: mustURL(t, "https://"+addr), Username: proxyUser, Password: pass(proxyPass), RootCAs: pool}, s
		}},
	}
	type result struct {
		Status, Body, ALPN string
		Proto              int
		TLS                bool
		Tunnels, Requests  int64
	}
	for _, pc := range proxies {
		for _, withTLS := range []bool{true, false} {
			name := pc.name + "/plain target"
			want := result{Status: "200 OK", Body: "ok", Proto: 1, Tunnels: 1, Requests: 1}
			if withTLS {
				name = pc.name + "/tls target"
				want.TLS, want.ALPN = true, "http/1.1"
			}
			t.Run(name, func(t *testing.T) {
				tg := newTarget(t, withTLS)
				p, counter := pc.start(t)
				d := newDialer(t, Options{Proxies: []Proxy{p}, ProviderCAs: tg.pool()})
				resp, body, err := get(t, d, tg.URL+"/v1/models")
				if err != nil {
					t.Fatal(err)
				}
				got := result{
					Status: resp.Status, Body: body, Proto: resp.ProtoMajor, TLS: resp.TLS != nil,
					Tunnels: counter.Tunnels(), Requests: tg.requests.Load(),
				}
				if resp.TLS != nil {
					got.ALPN = resp.TLS.NegotiatedProtocol
				}
				if diff := cmp.Diff(got, want); diff != "" {
					t.Errorf("round trip (-got +want):\n%s", diff)
				}
			})
		}
	}
}

func TestNotSentErrors(t *testing.T) {
	type want struct {
		Stage          Stage
		EgressFault    bool
		Proxy          string
		TargetConns    int64
		CertVerifyErr  bool
		ConnectTimeout bool
	}
	tests := []struct {
		name    string
		timeout time.Duration
		proxy   func(t *testing.T, tg *target) Proxy
		cas     func(tg *target) *x509.CertPool
		want    want
	}{
		{
			name: "socks5 wrong password",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startSOCKS(t, socks5proxy.Options{Username: proxyUser, Password: proxyPass})
				return Proxy{Name: "s", URL: mustURL(t, "socks5://"+addr), Username: proxyUser, Password: pass(wrongPass)}
			},
			want: want{Stage: StageProxyAuth, EgressFault: true, Proxy: "s"},
		},
		{
			name: "socks5 credentials required, none configured",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startSOCKS(t, socks5proxy.Options{Username: proxyUser, Password: proxyPass})
				return Proxy{Name: "s", URL: mustURL(t, "socks5://"+addr)}
			},
			want: want{Stage: StageProxyAuth, EgressFault: true, Proxy: "s"},
		},
		{
			name: "socks5 ruleset refuses target",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startSOCKS(t, socks5proxy.Options{Allow: func(string, int) bool { return false }})
				return Proxy{Name: "s", URL: mustURL(t, "socks5://"+addr)}
			},
			want: want{Stage: StageProxyPolicy, EgressFault: true, Proxy: "s"},
		},
		{
			name: "socks5 proxy port closed",
			proxy: func(t *testing.T, tg *target) Proxy {
				return Proxy{Name: "s", URL: mustURL(t, "socks5://"+deadAddr(t)), Username: proxyUser, Password: pass(proxyPass)}
			},
			want: want{Stage: StageProxyDial, EgressFault: true, Proxy: "s"},
		},
		{
			name: "socks5 proxy silent at greeting",
			proxy: func(t *testing.T, tg *target) Proxy {
				return Proxy{Name: "s", URL: mustURL(t, "socks5://"+silentListener(t))}
			},
			timeout: 200 * time.Millisecond,
			want:    want{Stage: StageProxyDial, EgressFault: true, Proxy: "s", ConnectTimeout: true},
		},
		{
			name: "socks5 target refused",
			proxy: func(t *testing.T, tg *target) Proxy {
				dead := deadAddr(t)
				_, addr := startSOCKS(t, socks5proxy.Options{Dial: redirect(dead)})
				return Proxy{Name: "s", URL: mustURL(t, "socks5://"+addr)}
			},
			want: want{Stage: StageTarget, Proxy: "s"},
		},
		{
			name: "socks5 no reply before the connect timeout",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startSOCKS(t, socks5proxy.Options{Dial: blockUntilDone})
				return Proxy{Name: "s", URL: mustURL(t, "socks5://"+addr)}
			},
			timeout: 200 * time.Millisecond,
			want:    want{Stage: StageTarget, Proxy: "s", ConnectTimeout: true},
		},
		{
			name: "socks5 untrusted provider certificate",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startSOCKS(t, socks5proxy.Options{})
				return Proxy{Name: "s", URL: mustURL(t, "socks5://"+addr)}
			},
			cas:  func(*target) *x509.CertPool { return x509.NewCertPool() },
			want: want{Stage: StageProviderTLS, Proxy: "s", TargetConns: 1, CertVerifyErr: true},
		},
		{
			name: "connect wrong password (407)",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startConnect(t, connectproxy.Options{Username: proxyUser, Password: proxyPass})
				return Proxy{Name: "c", URL: mustURL(t, "http://"+addr), Username: proxyUser, Password: pass(wrongPass)}
			},
			want: want{Stage: StageProxyAuth, EgressFault: true, Proxy: "c"},
		},
		{
			name: "connect policy refusal (403)",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startConnect(t, connectproxy.Options{Allow: func(string, int) bool { return false }})
				return Proxy{Name: "c", URL: mustURL(t, "http://"+addr)}
			},
			want: want{Stage: StageProxyPolicy, EgressFault: true, Proxy: "c"},
		},
		{
			name: "connect proxy port closed",
			proxy: func(t *testing.T, tg *target) Proxy {
				return Proxy{Name: "c", URL: mustURL(t, "http://"+deadAddr(t)), Username: proxyUser, Password: pass(proxyPass)}
			},
			want: want{Stage: StageProxyDial, EgressFault: true, Proxy: "c"},
		},
		{
			name: "connect target refused (502)",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startConnect(t, connectproxy.Options{Dial: redirect(deadAddr(t))})
				return Proxy{Name: "c", URL: mustURL(t, "http://"+addr)}
			},
			want: want{Stage: StageTarget, Proxy: "c"},
		},
		{
			name: "connect proxy silent after CONNECT",
			proxy: func(t *testing.T, tg *target) Proxy {
				return Proxy{Name: "c", URL: mustURL(t, "http://"+silentListener(t))}
			},
			timeout: 200 * time.Millisecond,
			want:    want{Stage: StageTarget, Proxy: "c", ConnectTimeout: true},
		},
		{
			name: "tls proxy with untrusted certificate",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr, _ := startConnectTLS(t, connectproxy.Options{Username: proxyUser, Password: proxyPass})
				return Proxy{Name: "t", URL: mustURL(t, "https://"+addr), Username: proxyUser, Password: pass(proxyPass)}
			},
			want: want{Stage: StageProxyTLS, EgressFault: true, Proxy: "t", CertVerifyErr: true},
		},
		{
			name: "tls proxy trusted, wrong password",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr, pool := startConnectTLS(t, connectproxy.Options{Username: proxyUser, Password: proxyPass})
				return Proxy{Name: "t", URL: mustURL(t, "https://"+addr), Username: proxyUser, Password: pass(wrongPass), RootCAs: pool}
			},
			want: want{Stage: StageProxyAuth, EgressFault: true, Proxy: "t"},
		},
		{
			name: "connect untrusted provider certificate",
			proxy: func(t *testing.T, tg *target) Proxy {
				_, addr := startConnect(t, connectproxy.Options{})
				return Proxy{Name: "c", URL: mustURL(t, "http://"+addr)}
			},
			cas:  func(*target) *x509.CertPool { return nil }, // system pool
			want: want{Stage: StageProviderTLS, Proxy: "c", TargetConns: 1, CertVerifyErr: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t, true)
			cas := tg.pool()
			if tt.cas != nil {
				cas = tt.cas(tg)
			}
			d := newDialer(t, Options{
				Proxies:        []Proxy{tt.proxy(t, tg)},
				ConnectTimeout: tt.timeout,
				ProviderCAs:    cas,
			})
			_, _, err := get(t, d, tg.URL+"/")
			if err == nil {
				t.Fatal("request succeeded, want a NotSentError")
			}
			assertNoSecrets(t, err)
			nse := notSent(t, err)
			var cve *tls.CertificateVerificationError
			var uae x509.UnknownAuthorityError
			got := want{
				Stage:          nse.Stage,
				EgressFault:    nse.EgressFault(),
				Proxy:          nse.Proxy,
				TargetConns:    tg.conns.Load(),
				CertVerifyErr:  errors.As(err, &cve) || errors.As(err, &uae),
				ConnectTimeout: errors.Is(err, ErrConnectTimeout),
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("error %q (-got +want):\n%s", err, diff)
			}
			if tg.requests.Load() != 0 {
				t.Errorf("target saw %d requests, want 0", tg.requests.Load())
			}
		})
	}
}

// redirect is a proxy Dial hook that connects to addr whatever was asked.
func redirect(addr string) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// blockUntilDone is a proxy Dial hook for a black-holed target: it returns
// only when the proxy closes.
func blockUntilDone(ctx context.Context, _, _ string) (net.Conn, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestFailoverAfterEgressFault(t *testing.T) {
	tg := newTarget(t, true)
	refusing, refusingAddr := startConnect(t, connectproxy.Options{Allow: func(string, int) bool { return false }})
	good, goodAddr := startSOCKS(t, socks5proxy.Options{})
	var mu sync.Mutex
	var failures []string // proxy/stage of every failed attempt, reported by OnFailure
	d := newDialer(t, Options{
		Proxies: []Proxy{
			{Name: "dead", URL: mustURL(t, "http://"+deadAddr(t))},
			{Name: "refusing", URL: mustURL(t, "http://"+refusingAddr)},
			{Name: "good", URL: mustURL(t, "socks5://"+goodAddr)},
		},
		ProviderCAs: tg.pool(),
		OnFailure: func(e *NotSentError) {
			mu.Lock()
			defer mu.Unlock()
			failures = append(failures, e.Proxy+"/"+e.Stage.String())
		},
	})
	type counts struct {
		RefusingConns, GoodTunnels, Requests int64
		Failures                             []string
	}
	for i, want := range []counts{
		// dead, refusing, then good: both failures reported, though the dial worked
		{RefusingConns: 1, GoodTunnels: 1, Requests: 1, Failures: []string{"dead/proxy_dial", "refusing/proxy_policy"}},
		// starts at good, the proxy that last worked
		{RefusingConns: 1, GoodTunnels: 2, Requests: 2, Failures: []string{"dead/proxy_dial", "refusing/proxy_policy"}},
	} {
		if _, _, err := get(t, d, tg.URL+"/"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		mu.Lock()
		got := counts{refusing.Connections(), good.Tunnels(), tg.requests.Load(), slices.Clone(failures)}
		mu.Unlock()
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("after request %d (-got +want):\n%s", i, diff)
		}
	}
}

func TestNoFailoverAfterTargetFault(t *testing.T) {
	tg := newTarget(t, true)
	_, refusedAddr := startSOCKS(t, socks5proxy.Options{Dial: redirect(deadAddr(t))})
	second, secondAddr := startSOCKS(t, socks5proxy.Options{})
	d := newDialer(t, Options{
		Proxies: []Proxy{
			{Name: "first", URL: mustURL(t, "socks5://"+refusedAddr)},
			{Name: "second", URL: mustURL(t, "socks5://"+secondAddr)},
		},
		ProviderCAs: tg.pool(),
	})
	_, _, err := get(t, d, tg.URL+"/")
	nse := notSent(t, err)
	type result struct {
		Proxy         string
		Stage         Stage
		SecondDialled int64
	}
	got := result{nse.Proxy, nse.Stage, second.Connections()}
	if diff := cmp.Diff(got, result{"first", StageTarget, 0}); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

func TestCanceledContextStopsFailover(t *testing.T) {
	second, secondAddr := startSOCKS(t, socks5proxy.Options{})
	d := newDialer(t, Options{Proxies: []Proxy{
		{Name: "first", URL: mustURL(t, "socks5://"+silentListener(t))},
		{Name: "second", URL: mustURL(t, "socks5://"+secondAddr)},
	}})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := d.DialContext(ctx, "tcp", "127.0.0.1:443")
	nse := notSent(t, err)
	type result struct {
		Proxy         string
		Canceled      bool
		SecondDialled int64
	}
	got := result{nse.Proxy, errors.Is(err, context.Canceled), second.Connections()}
	if diff := cmp.Diff(got, result{"first", true, 0}); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// TestProxyEnvironmentIgnored: proxy variables must change nothing. The
// target is named (example.com, redirected by the proxy's Dial hook) because
// Go's environment proxy logic always bypasses loopback addresses.
func TestProxyEnvironmentIgnored(t *testing.T) {
	bogus := "http://" + deadAddr(t)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, bogus)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	for _, withTLS := range []bool{true, false} {
		tg := newTarget(t, withTLS)
		s, addr := startConnect(t, connectproxy.Options{Dial: redirect(tg.Listener.Addr().String())})
		d := newDialer(t, Options{Proxies: []Proxy{{Name: "c", URL: mustURL(t, "http://"+addr)}}, ProviderCAs: tg.pool()})
		u := "http://example.com/"
		if withTLS {
			u = "https://example.com/"
		}
		if _, _, err := get(t, d, u); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		type counts struct{ Tunnels, Requests int64 }
		if diff := cmp.Diff(counts{s.Tunnels(), tg.requests.Load()}, counts{1, 1}); diff != "" {
			t.Errorf("%s via the configured proxy (-got +want):\n%s", u, diff)
		}
	}
}

func TestTransportSettings(t *testing.T) {
	d := newDialer(t, Options{Proxies: []Proxy{{Name: "c", URL: mustURL(t, "http://127.0.0.1:1")}}})
	tr := d.Transport()
	type settings struct {
		ProxyNil, DialSet, DialTLSSet, TLSNextProtoEmpty bool
		ForceHTTP2, HTTP2, HTTP1                         bool
		DisableCompression                               bool
		MaxIdleConns, MaxIdleConnsPerHost                int
		IdleConnTimeout, ResponseHeaderTimeout           time.Duration
		ExpectContinueTimeout                            time.Duration
	}
	got := settings{
		ProxyNil:              tr.Proxy == nil,
		DialSet:               tr.DialContext != nil,
		DialTLSSet:            tr.DialTLSContext != nil,
		TLSNextProtoEmpty:     tr.TLSNextProto != nil && len(tr.TLSNextProto) == 0,
		ForceHTTP2:            tr.ForceAttemptHTTP2,
		HTTP2:                 tr.Protocols.HTTP2(),
		HTTP1:                 tr.Protocols.HTTP1(),
		DisableCompression:    tr.DisableCompression,
		MaxIdleConns:          tr.MaxIdleConns,
		MaxIdleConnsPerHost:   tr.MaxIdleConnsPerHost,
		IdleConnTimeout:       tr.IdleConnTimeout,
		ResponseHeaderTimeout: tr.ResponseHeaderTimeout,
		ExpectContinueTimeout: tr.ExpectContinueTimeout,
	}
	want := settings{
		ProxyNil: true, DialSet: true, DialTLSSet: true, TLSNextProtoEmpty: true,
		HTTP1: true, DisableCompression: true,
		MaxIdleConns: DefaultIdleConns, MaxIdleConnsPerHost: DefaultIdleConns,
		IdleConnTimeout: 90 * time.Second,
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("transport (-got +want):\n%s", diff)
	}
}

// TestNameResolvedByProxy checks that a host name reaches the proxy
// unresolved and that the provider certificate is verified for that name.
func TestNameResolvedByProxy(t *testing.T) {
	tg := newTarget(t, true) // certificate valid for example.com
	var seen atomic.Value
	hook := func(ctx context.Context, network, addr string) (net.Conn, error) {
		seen.Store(addr)
		var d net.Dialer
		return d.DialContext(ctx, network, tg.Listener.Addr().String())
	}
	_, socksAddr := startSOCKS(t, socks5proxy.Options{Dial: hook})
	_, connectAddr := startConnect(t, connectproxy.Options{Dial: hook})
	for _, u := range []string{"socks5://" + socksAddr, "http://" + connectAddr} {
		seen.Store("")
		d := newDialer(t, Options{Proxies: []Proxy{{Name: "p", URL: mustURL(t, u)}}, ProviderCAs: tg.pool()})
		_, body, err := get(t, d, "https://example.com/")
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		type result struct{ ProxyWasAsked, Body string }
		if diff := cmp.Diff(result{seen.Load().(string), body}, result{"example.com:443", "ok"}); diff != "" {
			t.Errorf("%s (-got +want):\n%s", u, diff)
		}
	}
}

// TestConnectKeepsBytesAfterResponse: bytes a proxy sends right after its
// 200 belong to the tunnel and must not be lost in the response reader.
func TestConnectKeepsBytesAfterResponse(t *testing.T) {
	addr := scriptedProxy(t, "HTTP/1.1 200 Connection established\r\n\r\nhello from the tunnel")
	d := newDialer(t, Options{Proxies: []Proxy{{Name: "raw", URL: mustURL(t, "http://"+addr)}}})
	conn, err := d.DialContext(t.Context(), "tcp", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second)) // lost bytes fail, not hang
	got := make([]byte, len("hello from the tunnel"))
	_, err = io.ReadFull(conn, got)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(got), "hello from the tunnel"); diff != "" {
		t.Errorf("tunnel bytes (-got +want):\n%s", diff)
	}
}

// scriptedProxy reads one request header per connection and writes answer
// (closing at once when answer is empty, else holding the connection until
// the client closes it).
func scriptedProxy(t *testing.T, answer string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 4096)
				n := 0
				for !strings.Contains(string(buf[:n]), "\r\n\r\n") {
					m, err := c.Read(buf[n:])
					if err != nil {
						return
					}
					n += m
				}
				if answer == "" {
					return
				}
				io.WriteString(c, answer)
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return l.Addr().String()
}

func TestConnectAnswers(t *testing.T) {
	type result struct {
		Stage       Stage
		EgressFault bool
		Status      int
	}
	tests := []struct {
		name   string
		answer string
		want   result
	}{
		{"closes without answering", "", result{StageProxyDial, true, 0}},
		{"not http", "SSH-2.0-OpenSSH_9.2\r\n\r\n", result{StageProxyDial, true, 0}},
		{"401 as tinyproxy sends for a wrong password", "HTTP/1.0 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\nConnection: close\r\n\r\n", result{StageProxyAuth, true, 401}},
		{"407", "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n", result{StageProxyAuth, true, 407}},
		{"500 as tinyproxy sends for a refused target", "HTTP/1.1 500 Unable to connect\r\nConnection: close\r\n\r\n", result{StageTarget, false, 500}},
		{"503 as squid sends for a dead target", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", result{StageTarget, false, 503}},
		{"405 from a proxy without CONNECT", "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n", result{StageProxyAuth, true, 405}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := scriptedProxy(t, tt.answer)
			d := newDialer(t, Options{Proxies: []Proxy{{Name: "raw", URL: mustURL(t, "http://"+addr), Username: proxyUser, Password: pass(proxyPass)}}})
			conn, err := d.DialTLSContext(t.Context(), "tcp", "127.0.0.1:443")
			if err == nil {
				conn.Close()
				t.Fatal("dial succeeded, want a NotSentError")
			}
			assertNoSecrets(t, err)
			nse := notSent(t, err)
			got := result{Stage: nse.Stage, EgressFault: nse.EgressFault()}
			var cse *connectStatusError
			if errors.As(err, &cse) {
				got.Status = cse.code
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("error %q (-got +want):\n%s", err, diff)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string // a substring; "" = valid
	}{
		{"socks5", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "socks5://127.0.0.1:1080")}}}, ""},
		{"https with auth", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "https://proxy.internal:3129/"), Username: "u", Password: pass("p")}}}, ""},
		{"no proxies", Options{}, "no proxy configured"},
		{"nil url", Options{Proxies: []Proxy{{Name: "a"}}}, "no url"},
		{"userinfo in url", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "http://u:"+proxyPass+"@127.0.0.1:3128")}}}, "userinfo"},
		{"missing port", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "http://127.0.0.1")}}}, "explicit port"},
		{"unknown scheme", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "socks4://127.0.0.1:1080")}}}, "unsupported scheme"},
		{"path", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "http://127.0.0.1:3128/x")}}}, "scheme://host:port"},
		{"password without user", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "http://127.0.0.1:3128"), Password: pass(proxyPass)}}}, "without username"},
		{"colon in basic user", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "http://127.0.0.1:3128"), Username: "a:b"}}}, "':'"},
		{"socks5 long password", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "socks5://127.0.0.1:1080"), Username: "u", Password: pass(strings.Repeat("x", 256))}}}, "255 bytes"},
		{"negative timeout", Options{Proxies: []Proxy{{Name: "a", URL: mustURL(t, "socks5://127.0.0.1:1080")}}, ConnectTimeout: -time.Second}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			assertNoSecrets(t, err)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
				t.Errorf("New() error = %q, want it to contain %q", got, tt.wantErr)
			}
		})
	}
}

func TestDialRejectsBadTargets(t *testing.T) {
	s, addr := startSOCKS(t, socks5proxy.Options{})
	d := newDialer(t, Options{Proxies: []Proxy{{Name: "s", URL: mustURL(t, "socks5://"+addr)}}})
	for _, tc := range []struct{ network, addr string }{
		{"udp", "127.0.0.1:53"},
		{"tcp", "127.0.0.1"},
		{"tcp", "127.0.0.1:0"},
		{"tcp", ":443"},
		{"tcp", "evil\r\nX-Injected: 1:443"},
	} {
		if c, err := d.DialContext(t.Context(), tc.network, tc.addr); err == nil {
			c.Close()
			t.Errorf("DialContext(%q, %q) succeeded, want an error", tc.network, tc.addr)
		}
	}
	if got := s.Connections(); got != 0 {
		t.Errorf("proxy saw %d connections for invalid targets, want 0", got)
	}
}

func TestConnectStatusStage(t *testing.T) {
	type result struct {
		Stage Stage
		OK    bool
	}
	tests := []struct {
		code int
		want result
	}{
		{200, result{0, true}},
		{204, result{0, true}},
		{401, result{StageProxyAuth, false}},
		{407, result{StageProxyAuth, false}},
		{403, result{StageProxyPolicy, false}},
		{405, result{StageProxyAuth, false}},
		{400, result{StageProxyAuth, false}},
		{501, result{StageProxyAuth, false}},
		{302, result{StageProxyAuth, false}},
		{500, result{StageTarget, false}},
		{502, result{StageTarget, false}},
		{503, result{StageTarget, false}},
		{504, result{StageTarget, false}},
	}
	for _, tt := range tests {
		stage, ok := connectStatusStage(tt.code)
		if diff := cmp.Diff(result{stage, ok}, tt.want); diff != "" {
			t.Errorf("connectStatusStage(%d) (-got +want):\n%s", tt.code, diff)
		}
	}
}

func TestClassifySOCKS(t *testing.T) {
	type result struct {
		Stage Stage
		Err   error
		Code  int // SOCKS reply code, -1 if none
	}
	tests := []struct {
		name     string
		rec      []byte
		haveAuth bool
		timedOut bool
		want     result
	}{
		{"nothing, closed", nil, false, false, result{StageProxyDial, errProxyClosed, -1}},
		{"nothing, timed out", nil, false, true, result{StageProxyDial, errNoReply, -1}},
		{"not socks5", []byte("HT"), false, false, result{StageProxyDial, errProxyProtocol, -1}},
		{"no acceptable method", []byte{5, 0xff}, true, false, result{StageProxyAuth, errSOCKSNoMethod, -1}},
		{"method not offered", []byte{5, 0x01}, true, false, result{StageProxyDial, errProxyProtocol, -1}},
		{"user/pass needed", []byte{5, 2}, false, false, result{StageProxyAuth, errSOCKSNeedsAuth, -1}},
		{"no auth reply", []byte{5, 2}, true, false, result{StageProxyAuth, errSOCKSNoReplyToAuth, -1}},
		{"auth rejected", []byte{5, 2, 1, 1}, true, false, result{StageProxyAuth, errSOCKSAuthRejected, -1}},
		{"auth bad version", []byte{5, 2, 5, 0}, true, false, result{StageProxyAuth, errSOCKSAuthRejected, -1}},
		{"auth ok, closed before reply", []byte{5, 2, 1, 0}, true, false, result{StageProxyDial, errProxyClosed, -1}},
		{"auth ok, reply timed out", []byte{5, 2, 1, 0}, true, true, result{StageTarget, errNoReply, -1}},
		{"no auth, reply timed out", []byte{5, 0}, false, true, result{StageTarget, errNoReply, -1}},
		{"bad reply version", []byte{5, 0, 4, 0}, false, false, result{StageProxyDial, errProxyProtocol, -1}},
		{"success reply then failure", []byte{5, 0, 5, 0}, false, false, result{StageProxyDial, errProxyProtocol, -1}},
		{"general failure", []byte{5, 0, 5, 1}, false, false, result{StageTarget, nil, 1}},
		{"ruleset", []byte{5, 0, 5, 2}, false, false, result{StageProxyPolicy, nil, 2}},
		{"network unreachable", []byte{5, 0, 5, 3}, false, false, result{StageTarget, nil, 3}},
		{"host unreachable", []byte{5, 2, 1, 0, 5, 4}, true, false, result{StageTarget, nil, 4}},
		{"refused", []byte{5, 0, 5, 5}, false, false, result{StageTarget, nil, 5}},
		{"ttl expired", []byte{5, 0, 5, 6}, false, false, result{StageTarget, nil, 6}},
		{"command not supported", []byte{5, 0, 5, 7}, false, false, result{StageProxyAuth, nil, 7}},
		{"address type not supported", []byte{5, 0, 5, 8}, false, false, result{StageProxyAuth, nil, 8}},
		{"unassigned", []byte{5, 0, 5, 0x42}, false, false, result{StageProxyAuth, nil, 0x42}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stage, err := classifySOCKS(tt.rec, tt.haveAuth, tt.timedOut)
			got := result{Stage: stage, Err: err, Code: -1}
			var re *socksReplyError
			if errors.As(err, &re) {
				got.Err, got.Code = nil, int(re.code)
			}
			if diff := cmp.Diff(got, tt.want, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

func TestNotSentErrorText(t *testing.T) {
	err := &NotSentError{Proxy: "corp", Stage: StageProxyAuth, Err: &connectStatusError{code: 407}}
	want := `egress: proxy_auth via proxy "corp": proxy answered CONNECT with 407 Proxy Authentication Required`
	if diff := cmp.Diff(err.Error(), want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	var stages []string
	for s := Stage(0); s <= StageProviderTLS+1; s++ {
		stages = append(stages, s.String())
	}
	wantStages := []string{"stage(0)", "proxy_dial", "proxy_auth", "proxy_tls", "proxy_policy", "target", "provider_tls", "stage(7)"}
	if diff := cmp.Diff(stages, wantStages); diff != "" {
		t.Errorf("stage names (-got +want):\n%s", diff)
	}
}

// BenchmarkDial measures one tunnel (proxy dial + handshake) through each
// in-process proxy; the target is a plain loopback listener.
func BenchmarkDial(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	accepted := make(chan struct{})
	defer func() {
		l.Close()
		<-accepted
	}()
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	socks, socksAddr, err := socks5proxy.Listen("127.0.0.1:0", socks5proxy.Options{Username: proxyUser, Password: proxyPass})
	if err != nil {
		b.Fatal(err)
	}
	defer socks.Close()
	conn, connectAddr, err := connectproxy.Listen("127.0.0.1:0", connectproxy.Options{Username: proxyUser, Password: proxyPass})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for _, u := range []string{"socks5://" + socksAddr, "http://" + connectAddr} {
		d, err := New(Options{Proxies: []Proxy{{Name: "p", URL: mustURL(b, u), Username: proxyUser, Password: pass(proxyPass)}}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.SplitN(u, ":", 2)[0], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := d.DialContext(b.Context(), "tcp", l.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

// TestSOCKSTunnelIsBare: once the SOCKS5 handshake is over, the tunnel the
// transport reads and writes is the TCP connection itself, with neither
// the handshake's tap nor x/net's wrapper on every read.
func TestSOCKSTunnelIsBare(t *testing.T) {
	target := echoTarget(t)
	_, addr := startSOCKS(t, socks5proxy.Options{Username: proxyUser, Password: proxyPass})
	u := mustURL(t, "socks5://"+addr)
	d := newDialer(t, Options{Proxies: []Proxy{{Name: "s", URL: u, Username: proxyUser, Password: pass(proxyPass)}}})
	conn, err := d.DialContext(t.Context(), "tcp", target)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, ok := conn.(*net.TCPConn); !ok {
		t.Errorf("the tunnel is a %T, not the bare TCP connection", conn)
	}
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q, %v", buf, err)
	}
}
