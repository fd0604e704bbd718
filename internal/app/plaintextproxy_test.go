package app

import (
	"bytes"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/config"
)

// TestPlaintextProxyOptInIsLogged: egress.insecure_plaintext_proxy is
// logged as a warning naming the proxies it lets through, and shown on
// /readyz; nothing is said when it is off.
func TestPlaintextProxyOptInIsLogged(t *testing.T) {
	proxies := []config.Proxy{
		{Name: "local", URL: &url.URL{Scheme: "socks5", Host: "127.0.0.1:1080"}},
		{Name: "lan", URL: &url.URL{Scheme: "socks5", Host: "10.0.0.5:1080"}},
		{Name: "tls", URL: &url.URL{Scheme: "https", Host: "proxy.example.com:3129"}},
	}
	for _, on := range []bool{false, true} {
		var logs bytes.Buffer
		n := &node{
			cfg:    &config.Config{Egress: config.Egress{Proxies: proxies, InsecurePlaintextProxy: on}},
			log:    slog.New(slog.NewTextHandler(&logs, nil)),
			health: newHealth(),
		}
		n.warnPlaintextProxies()
		got := logs.String()
		if !on {
			if got != "" {
				t.Errorf("opt-in off: logged %q", got)
			}
			continue
		}
		if !strings.Contains(got, "level=WARN") || !strings.Contains(got, "egress.insecure_plaintext_proxy") || !strings.Contains(got, "proxies=[lan]") {
			t.Errorf("opt-in on: log %q; want a WARN naming the opt-in and proxy lan only", got)
		}
		if !strings.Contains(n.health.Ready().Details["egress"], "insecure_plaintext_proxy") {
			t.Errorf("opt-in on: /readyz details %v lack it", n.health.Ready().Details)
		}
	}
}
