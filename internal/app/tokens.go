package app

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/metrics"
)

// mintCredentials makes the token source of every minted-token credential
// (docs/egress.md "Minted-token credentials") on the node's egress
// transport, so that a grant goes through the egress proxies like a
// provider request, and gives it to the credential as the value every
// attempt sends. The node owns the sources: run keeps them fresh and
// closes them. Each one's state is a /readyz detail and the gauge
// scootgate_credential_token_state; a credential with no token leaves the
// node ready (its backends are unusable, others serve).
func (n *node) mintCredentials(transport http.RoundTripper) error {
	creds := n.cfg.Credentials
	var minted map[string]bool
	var states []metrics.TokenCredential // by name, as the gauge lists them
	var sources []*credential.TokenSource
	for _, name := range slices.Sorted(maps.Keys(creds)) {
		c := creds[name]
		if c.Mint == nil {
			continue
		}
		ts, err := c.Mint(credential.TokenOptions{
			Name: name, Hosts: c.Hosts, Transport: transport,
			Now: n.o.TokenClock, Logger: n.log,
		})
		if err != nil {
			return fmt.Errorf("credentials.%s: %w", name, err)
		}
		if minted == nil {
			minted = map[string]bool{}
			// The config's map is the node's from here: routes compiled
			// from it, and the routing policy, see the token sources.
			creds = maps.Clone(creds)
		}
		minted[name] = true
		if c.AWS != nil {
			// Minted AWS keys sign; they are never a header value.
			keys := *c.AWS
			keys.Minted = ts
			c.AWS = &keys
		} else {
			c.Token = ts
		}
		creds[name] = c
		n.tokens = append(n.tokens, ts)
		n.health.AddDetail("credential "+name, func() string { return tokenDetail(ts.Status()) })
		states = append(states, metrics.TokenCredential{Name: name})
		sources = append(sources, ts)
	}
	if minted != nil {
		n.cfg.Credentials = creds
		n.metrics.RegisterTokens(func() []metrics.TokenCredential {
			out := slices.Clone(states)
			for i, ts := range sources {
				out[i].State = ts.Status().State.String()
			}
			return out
		})
	}
	return nil
}

// tokenDetail is a minted-token credential's /readyz detail: its state,
// and why the last grant failed. Never a token.
func tokenDetail(st credential.TokenStatus) string {
	s := st.State.String()
	if !st.Expiry.IsZero() {
		s += ", token expires " + st.Expiry.UTC().Format(time.RFC3339)
	}
	if st.Err != nil {
		s += fmt.Sprintf(", %d failed grants in a row: %v", st.Failures, st.Err)
	}
	return s
}
