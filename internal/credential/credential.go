// Package credential holds a node's provider credentials and the rule for
// where each may be sent (docs/egress.md "Where a credential may go").
//
// # Basics
//
// A [Credential] is a secret value and the hosts it may be sent to, as
// the node's [credentials.NAME] table lists them. [ParseHost] checks and
// normalises one entry of that list; [Credential.Allows] matches a
// backend's base_url host against the list. A [Policy] is everything a
// node decides about a routing document's backends before anything is
// sent: each credential only to its hosts, and no plaintext http://
// backend unless every egress proxy is on the node's loopback.
//
// # Host patterns
//
// An entry is a host name ("api.openai.com"), an IP address ("127.0.0.1",
// "::1" or "[::1]") or a wildcard "*." followed by a host name, which
// matches one or more labels in front of that name ("*.openai.azure.com"
// matches "x.openai.azure.com" and "a.b.openai.azure.com", never
// "openai.azure.com" itself). Entries and hosts compare in lower case,
// without a trailing dot; IP addresses compare as addresses. A pattern
// names no port: a credential listed for a host may go to any port of it.
// Names are ASCII: an internationalised name is written in punycode
// ("xn--…"), as base URLs are. A wildcard over a public suffix ("*.com",
// "*.co.uk", "*.azurewebsites.net") is refused: anyone can own a name
// under it.
package credential

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// Credential is one provider credential: its value and the hosts it may
// be sent to. Immutable.
type Credential struct {
	Secret secret.Secret
	// Hosts are the patterns of the credential's hosts list, each in the
	// form ParseHost returns. Empty allows no host.
	Hosts []string
	// Auth is how the credential is sent; AuthDefault: as the backend's
	// protocol sends it.
	Auth AuthHeader
	// AWS, for a credential of kind aws, is its key material; Secret is
	// then zero, and requests are signed rather than carrying a value
	// (docs/egress.md "Credential kinds"). nil for a static credential.
	AWS *AWS

	// Mint, for a minted kind (gcp_service_account, azure_entra,
	// aws_web_identity), makes the credential's token source once the
	// node has the egress transport its token endpoint is reached
	// through; o carries everything but the kind's own material, which
	// Mint holds. The source becomes Token, or, for minted AWS keys
	// (AWS set), AWS.Minted. nil for other kinds.
	Mint func(o TokenOptions) (*TokenSource, error) `json:"-"`
	// Token is where each attempt gets the value it sends, for a
	// credential whose value is minted (Mint, set by the node once the
	// source exists); Secret is then zero. nil for other kinds.
	Token Bearer `json:"-"`
	// Kind is the kind of a minted-token credential, whose tokens only one
	// platform takes (PlatformOf): KindAzureEntra or KindGCPServiceAccount;
	// empty for the other kinds.
	Kind string `json:"-"`
}

// Bearer is a credential whose value is a short-lived token obtained when
// it is needed (a *TokenSource). An error wrapping ErrNoToken means none
// may be sent now: the request was not sent, and the backend is not to
// blame.
type Bearer interface {
	Token(ctx context.Context) (secret.Secret, error)
}

// Allows reports whether c may be sent to host, a URL's host as
// url.URL.Hostname returns it (any case, maybe with a trailing dot, an
// IPv6 address without brackets).
func (c Credential) Allows(host string) bool {
	h := Host(host)
	if h == "" {
		return false
	}
	_, isIP := parseIP(h)
	for _, p := range c.Hosts {
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			// One or more labels in front of suffix; an address has no labels.
			if !isIP && strings.HasSuffix(h, "."+suffix) {
				return true
			}
		} else if h == p {
			return true
		}
	}
	return false
}

// Host returns host in the form patterns are matched against: lower case,
// without a trailing dot, an IP address in its canonical form (IPv4-mapped
// IPv6 as IPv4). "" for an empty host.
func Host(host string) string {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, ok := parseIP(h); ok {
		return ip.String()
	}
	return h
}

// parseIP parses an IP address, bracketed or not, without a zone.
func parseIP(s string) (netip.Addr, bool) {
	if b, ok := strings.CutPrefix(s, "["); ok {
		s, ok = strings.CutSuffix(b, "]")
		if !ok {
			return netip.Addr{}, false
		}
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// ParseHost checks one entry of a credential's hosts list and returns its
// normal form (see the package doc), or an error that says what is wrong.
// The error quotes the entry, which is a host name, never a secret.
func ParseHost(s string) (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf(format, args...)
	}
	if s == "" {
		return fail("empty; expected a host name like \"api.openai.com\"")
	}
	if len(s) > 256 {
		return fail("longer than 256 bytes; expected a host name")
	}
	if strings.Contains(s, "/") {
		return fail("%q is not a host name; write the host alone, without scheme or path", s)
	}
	if ip, ok := parseIP(s); ok {
		return ip.String(), nil
	}
	h := strings.TrimSuffix(strings.ToLower(s), ".")
	suffix, wildcard := strings.CutPrefix(h, "*.")
	switch {
	case strings.Contains(suffix, "*"):
		return fail("%q: a wildcard is only allowed as a whole first label, \"*.example.com\"", s)
	case strings.Contains(suffix, "%"):
		return fail("%q is not a host name: an IP address with a zone names no host", s)
	case strings.Contains(suffix, ":"):
		return fail("%q: expected a host name without a port (a listed host may be reached on any port)", s)
	case !ascii(suffix):
		return fail("%q: write an internationalised name in punycode (\"xn--…\"), as base_url does", s)
	case !routesnap.ValidHostname(suffix):
		return fail("%q is not a host name: expected ASCII letters, digits, '-' and '_' in dot-separated labels of 1-63 characters", s)
	case routesnap.EndsInNumber(suffix):
		return fail("%q ends in a numeric label; expected a host name or an IP address", s)
	}
	if wildcard {
		if ps, _ := publicsuffix.PublicSuffix(suffix); ps == suffix {
			return fail("%q would match every name under the public suffix %q, which anyone can register; list the hosts, or a wildcard under a domain its owner controls", s, suffix)
		}
		return "*." + suffix, nil
	}
	return h, nil
}

func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Policy is what a node decides about a routing document's backends before
// it sends anything (docs/egress.md "Where a credential may go").
type Policy struct {
	// Credentials are the node's credentials by name.
	Credentials map[string]Credential
	// RemoteProxy names the first egress proxy that is not on the node's
	// loopback, and RemoteProxyPath its config key; "" when every proxy
	// is. An http:// backend is refused while there is one: the backend's
	// host is resolved by the proxy, so the plaintext request, credential
	// included, would cross the proxy's network.
	RemoteProxy, RemoteProxyPath string
}

// Defined reports whether the node defines credential name.
func (p Policy) Defined(name string) bool {
	_, ok := p.Credentials[name]
	return ok
}

// Check returns a problem for each backend that pairs a credential with a
// host the credential does not list, or that is plaintext http:// while
// an egress proxy is not on loopback, at routing document paths
// ("backends[2].credential"), in document order. A backend whose
// credential is not defined or whose base_url is invalid is skipped:
// routesnap's own validation reports it. Messages name the backend, the
// credential and the host, never a value.
func (p Policy) Check(bs []routesnap.Backend) []routesnap.Problem {
	var ps []routesnap.Problem
	for i, b := range bs {
		if routesnap.CheckBaseURL(b.BaseURL) != nil {
			continue
		}
		u, err := url.Parse(b.BaseURL)
		if err != nil {
			continue
		}
		path := fmt.Sprintf("backends[%d]", i)
		if u.Scheme == "http" && p.RemoteProxy != "" {
			ps = append(ps, routesnap.Problem{Path: path + ".base_url", Msg: fmt.Sprintf(
				"plaintext http:// backend, but egress proxy %q (%s) is not on loopback: the request and its credential "+
					"would leave this machine unencrypted; use https://, or only loopback egress proxies",
				p.RemoteProxy, p.RemoteProxyPath)})
		}
		c, ok := p.Credentials[b.Credential]
		if !ok || !routesnap.ValidID(b.Credential) {
			continue
		}
		ps = append(ps, p.checkKind(path, b, c)...)
		if !c.Allows(u.Hostname()) {
			// Ids pass ValidID and hosts passed CheckBaseURL: both are
			// safe to quote.
			ps = append(ps, routesnap.Problem{Path: path + ".credential", Msg: fmt.Sprintf(
				"backend %q sends credential %q to host %q, which the node's %s does not list",
				b.ID, b.Credential, Host(u.Hostname()), HostsKey(b.Credential))})
		}
	}
	return ps
}

// Validate is doc.ValidateCredentials with p's credentials plus [Policy.Check]:
// a *routesnap.ValidationError listing every problem (the document's own
// first, then the policy's), or nil.
func (p Policy) Validate(doc *routesnap.Snapshot) error {
	err := doc.ValidateCredentials(p.Defined)
	return p.join(err, doc.Backends)
}

// ValidateRoutes is routesnap.ValidateRoutes with p's credentials plus
// [Policy.Check], for routes without a document around them.
func (p Policy) ValidateRoutes(bs []routesnap.Backend, ms []routesnap.Model) error {
	return p.join(routesnap.ValidateRoutes(bs, ms, p.Defined), bs)
}

func (p Policy) join(err error, bs []routesnap.Backend) error {
	ps := p.Check(bs)
	if len(ps) == 0 {
		return err
	}
	if err == nil {
		return &routesnap.ValidationError{Problems: ps}
	}
	var ve *routesnap.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	return &routesnap.ValidationError{Problems: append(ve.Problems[:len(ve.Problems):len(ve.Problems)], ps...)}
}

// HostsKey is the config key of credential name's hosts list.
func HostsKey(name string) string {
	if strings.Contains(name, ".") {
		return fmt.Sprintf("credentials.%q.hosts", name)
	}
	return "credentials." + name + ".hosts"
}

// PlatformOf returns the one platform (a routesnap.Platform* name) that
// takes a credential of kind, and what it takes, for messages; "" for a
// kind any platform may use.
func PlatformOf(kind string) (platform, takes string) {
	switch kind {
	case KindAzureEntra:
		return routesnap.PlatformAzure, "Entra tokens"
	case KindGCPServiceAccount:
		return routesnap.PlatformVertex, "Google Cloud access tokens"
	}
	return "", ""
}

// checkKind returns the problems of pairing backend b with credential c
// of its kind: aws keys only sign, so they go only to a platform that
// takes signed requests (Bedrock), and only in their region when they
// name one; a minted token is for one cloud's resources, so an
// azure_entra credential goes only to platform azure and a
// gcp_service_account one only to platform vertex (a Google token sent
// to another provider would be a Google credential in a stranger's
// hands, whatever the hosts list says).
func (p Policy) checkKind(path string, b routesnap.Backend, c Credential) []routesnap.Problem {
	if platform, takes := PlatformOf(c.Kind); platform != "" && b.Platform != platform {
		return []routesnap.Problem{{Path: path + ".credential", Msg: fmt.Sprintf(
			"backend %q uses %s credential %q, but only platform %q takes %s", b.ID, c.Kind, b.Credential, platform, takes)}}
	}
	switch {
	case c.AWS == nil:
		return nil
	case b.Platform != routesnap.PlatformBedrock:
		return []routesnap.Problem{{Path: path + ".credential", Msg: fmt.Sprintf(
			"backend %q uses aws credential %q, but only platform %q takes AWS-signed requests", b.ID, b.Credential, routesnap.PlatformBedrock)}}
	case c.AWS.Region != "" && b.Region != "" && c.AWS.Region != b.Region:
		return []routesnap.Problem{{Path: path + ".region", Msg: fmt.Sprintf(
			"backend %q is in region %q, but aws credential %q is for region %q only", b.ID, b.Region, b.Credential, c.AWS.Region)}}
	}
	return nil
}
