package routesnap

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/scootgate/scootgate/pkg/internal/contract"
)

// Problem is one reason a document is invalid: a member path and what is
// wrong there.
type Problem = contract.Problem

// ValidationError lists every problem [Snapshot.Validate] found.
type ValidationError struct {
	Problems []Problem // in document order; never empty
}

func (e *ValidationError) Error() string {
	return contract.ProblemsText("routesnap: invalid snapshot: ", e.Problems)
}

// Validate checks the snapshot's meaning and returns a [*ValidationError]
// listing every problem, or nil. It checks that:
//
//   - schema is [MinSchema]..[Schema], version is at least 1, and no
//     member is newer than the document's schema;
//   - the backends and models pass [ValidateRoutes].
//
// Whether a credential name is defined is up to the node that loads the
// snapshot (its local configuration holds the values, docs/snapshots.md); see
// [Snapshot.ValidateCredentials].
func (s *Snapshot) Validate() error { return s.ValidateCredentials(nil) }

// ValidateCredentials is [Snapshot.Validate] plus, when defined is not
// nil, the check a node makes before it applies a snapshot: every
// credential a backend names must be one that defined reports true for
// (the node's own [credentials]). A credential problem is listed at its
// backend, in document order, like every other.
func (s *Snapshot) ValidateCredentials(defined func(name string) bool) error {
	if s == nil {
		return &ValidationError{Problems: []Problem{{Msg: "snapshot is nil"}}}
	}
	v := validator{defined: defined, schema: s.Schema}
	if s.Schema < MinSchema || s.Schema > Schema {
		v.add("schema", "must be %d..%d, got %d", MinSchema, Schema, s.Schema)
		v.schema = Schema // judge the members by the newest rules only
	}
	if s.Version < 1 {
		v.add("version", "must be at least 1")
	}
	v.routes(s.Backends, s.Models)
	return v.err()
}

// ValidateRoutes checks backends and models as [Snapshot.Validate] checks
// them inside a snapshot, for routes that come without a document around
// them (a node's static configuration decodes its routes into these
// types). defined is as for [Snapshot.ValidateCredentials]; nil skips the
// credential check. Paths are those of a snapshot ("backends[0].id",
// "models[1].targets[0].weight"); a caller that read another format maps
// them to its own. It checks that:
//
//   - there is at least one backend and at least one model (an empty
//     document is far more likely a publisher bug than an intent to serve
//     nothing, and it would turn every request into a 404);
//   - backend ids and credential names pass [ValidID]; backend ids are
//     unique;
//   - protocol is one of [Protocols]; a [ProtocolBedrockConverse] backend
//     (schema 2) is on [PlatformBedrock];
//   - base_url is acceptable to [CheckBaseURL];
//   - max_inflight_per_node is 1..[MaxInflight];
//   - include_usage is absent on a backend of another protocol than
//     [ProtocolOpenAI];
//   - endpoints, when present, lists at least one endpoint, each one of
//     [Endpoints] of the backend's protocol, none twice;
//   - model names (public and provider) pass [CheckModelName]; public
//     names are unique; a public name holds a "*" only as its last
//     character (a pattern, [IsPattern]), and a provider model holds at
//     most one, only in a pattern's target ([Expand]);
//   - every model has at least one target, every target names a backend of
//     the same list, weight is 1..[MaxWeight], tier is 0..[MaxTier], and no
//     two targets of a model share backend and provider model;
//   - context_window and max_output_tokens, when present, are
//     1..[MaxContextTokens], and max_output_tokens is at most
//     context_window;
//   - fallbacks, when present, pass the rules of [Model.Fallbacks];
//   - a model with a target on a [ProtocolGemini] backend has a name that
//     passes [GeminiName], and so does that target's model: both stand in
//     a Gemini method path.
//
// Routes without a document are judged by the newest schema's rules.
func ValidateRoutes(backends []Backend, models []Model, defined func(name string) bool) error {
	v := validator{defined: defined, schema: Schema}
	v.routes(backends, models)
	return v.err()
}

type validator struct {
	ps      []Problem
	defined func(string) bool // nil: credentials are not checked
	schema  int               // the document's schema number
}

// since records a problem at path when the document's schema is older
// than n, the schema that introduced the member at path: each member new
// in a schema calls it where the member is present (non-zero).
func (v *validator) since(n int, path string) {
	if v.schema < n {
		v.add(path, "needs schema %d or later (this document is schema %d); raise schema or remove the member", n, v.schema)
	}
}

func (v *validator) add(path, format string, args ...any) {
	v.ps = append(v.ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) err() error {
	if len(v.ps) > 0 {
		return &ValidationError{Problems: v.ps}
	}
	return nil
}

func (v *validator) routes(bs []Backend, ms []Model) {
	v.models(ms, v.backends(bs))
	v.fallbacks(bs, ms)
	v.geminiNames(bs, ms)
}

// GeminiNameRule says what [GeminiName] accepts, for messages.
const GeminiNameRule = `one path segment of letters, digits and -._~!$&'()*+,;=:@ (no "/", no percent-encoding, not "." or "..")`

// GeminiName reports whether s can stand for {model} in a Gemini method
// path, /v1beta/models/{model}:{method}: one RFC 3986 path segment,
// written plainly. A Gemini model id is one segment (Google's resource
// names are models/{id}; a tuned model, tunedModels/{id}, has a path of
// its own that a node does not serve), so a name with "/" could be listed
// but never called.
func GeminiName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// geminiNames checks the names a Gemini path carries: a model with a
// target on a gemini backend is called at /v1beta/models/{name}:{method},
// and the target's model is sent at {base_url}/models/{model}:{method}.
func (v *validator) geminiNames(bs []Backend, ms []Model) {
	gemini := make(map[string]bool, len(bs))
	for _, b := range bs {
		if b.Protocol == ProtocolGemini {
			gemini[b.ID] = true
		}
	}
	if len(gemini) == 0 {
		return
	}
	for i, m := range ms {
		path := "models[" + strconv.Itoa(i) + "]"
		named := false
		for j, t := range m.Targets {
			if !gemini[t.Backend] {
				continue
			}
			if !named && CheckModelName(m.Name) == "" && !GeminiName(m.Name) {
				v.add(path+".name", "a model with a gemini target is called at /v1beta/models/{model}:{method}; the name must be %s", GeminiNameRule)
			}
			named = true
			if CheckModelName(t.Model) == "" && !GeminiName(t.Model) {
				v.add(path+".targets["+strconv.Itoa(j)+"].model", "a gemini backend is sent {base_url}/models/{model}:{method}; the model must be %s", GeminiNameRule)
			}
		}
	}
}

// backends checks the backends and returns the index of each valid id.
func (v *validator) backends(bs []Backend) map[string]int {
	switch {
	case bs == nil:
		v.add("backends", "required")
	case len(bs) == 0:
		v.add("backends", "must list at least one backend")
	}
	ids := make(map[string]int, len(bs))
	for i, b := range bs {
		path := "backends[" + strconv.Itoa(i) + "]"
		if !ValidID(b.ID) {
			v.add(path+".id", "must be %s", IDRule)
		} else if j, dup := ids[b.ID]; dup {
			v.add(path+".id", "duplicate of backends[%d]", j)
		} else {
			ids[b.ID] = i
		}
		if Endpoints(b.Protocol) == nil {
			v.add(path+".protocol", "must be %s", contract.OneOf(Protocols()))
		}
		if err := CheckBaseURL(b.BaseURL); err != nil {
			v.add(path+".base_url", "%s", err.Msg)
		}
		switch {
		case !ValidID(b.Credential):
			v.add(path+".credential", "must be a credential name: %s", IDRule)
		case v.defined != nil && !v.defined(b.Credential):
			// A valid name is a short id, safe to quote.
			v.add(path+".credential", "unknown credential %q; this node's [credentials] does not define it", b.Credential)
		}
		if b.MaxInflightPerNode < 1 || b.MaxInflightPerNode > MaxInflight {
			v.add(path+".max_inflight_per_node", "must be 1..%d, got %d", MaxInflight, b.MaxInflightPerNode)
		}
		if b.IncludeUsage != nil && b.Protocol != ProtocolOpenAI && Endpoints(b.Protocol) != nil {
			v.add(path+".include_usage", "only applies to protocol %q (stream_options.include_usage); remove it", ProtocolOpenAI)
		}
		v.endpoints(path+".endpoints", b)
		v.platform(path, b)
		v.converse(path, b)
	}
	return ids
}

// platform checks a backend's cloud platform and its coordinates
// (schema 2): a platform that carries the backend's protocol, the
// coordinates it needs and no other platform's, and only endpoints it
// carries.
func (v *validator) platform(path string, b Backend) {
	if b.Platform != "" {
		v.since(2, path+".platform")
		if !PlatformServes(b.Platform, b.Protocol) && Endpoints(b.Protocol) != nil {
			v.add(path+".platform", "platform %q does not carry protocol %q; expected %s", clip(b.Platform), b.Protocol, platformsOf(b.Protocol))
		}
	}
	coord := func(key, value, platform, rule string, valid func(string) bool) {
		switch {
		case value == "" && b.Platform == platform:
			v.add(path+"."+key, "required on platform %q; expected %s", platform, rule)
		case value == "":
		case b.Platform != platform:
			v.since(2, path+"."+key)
			v.add(path+"."+key, "only applies to platform %q; remove it", platform)
		default:
			v.since(2, path+"."+key)
			if !valid(value) {
				v.add(path+"."+key, "must be %s", rule)
			}
		}
	}
	coord("region", b.Region, PlatformBedrock, `an AWS region like "us-east-1"`, ValidRegion)
	coord("project", b.Project, PlatformVertex, `a Google Cloud project id like "my-project"`, validProject)
	coord("location", b.Location, PlatformVertex, `a Google Cloud location like "us-east5" or "global"`, ValidRegion)
	coord("api_version", b.APIVersion, PlatformAzure, `an Azure OpenAI api-version like "2024-10-21"`, validAPIVersion)
	if only := PlatformEndpoints(b.Platform); only != nil {
		var of []string // the protocol's endpoints that the platform carries
		for _, e := range only {
			if slices.Contains(Endpoints(b.Protocol), e) {
				of = append(of, e)
			}
		}
		for i, e := range b.Endpoints {
			if !slices.Contains(only, e) && slices.Contains(Endpoints(b.Protocol), e) {
				v.add(path+".endpoints["+strconv.Itoa(i)+"]", "platform %q does not carry endpoint %q; expected %s", b.Platform, e, strings.Join(of, ", "))
			}
		}
	}
}

// converse checks a Bedrock Converse backend (schema 2): Bedrock's own
// API, carried by no wire but Bedrock's, so the backend names the
// platform (and so its region).
func (v *validator) converse(path string, b Backend) {
	if b.Protocol != ProtocolBedrockConverse {
		return
	}
	v.since(2, path+".protocol")
	if b.Platform == "" {
		v.add(path+".platform", "required for protocol %q: it is served only by Amazon Bedrock; set %q", ProtocolBedrockConverse, PlatformBedrock)
	}
}

// platformsOf lists the platforms of a protocol, for messages.
func platformsOf(protocol string) string {
	var out []string
	for _, p := range []string{PlatformOpenAI, PlatformAnthropic, PlatformGoogle, PlatformBedrock, PlatformVertex, PlatformAzure} {
		if PlatformServes(p, protocol) {
			out = append(out, strconv.Quote(p))
		}
	}
	if !PlatformServes("", protocol) {
		return strings.Join(out, ", ")
	}
	return strings.Join(out, ", ") + " (or none, for the protocol's own wire)"
}

// ValidRegion reports whether s is an AWS region or a Google Cloud
// location as a backend names it: 1-32 of [a-z0-9-], starting with a letter (AWS regions,
// Google Cloud locations); it becomes part of a host name or path.
func ValidRegion(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validProject: a Google Cloud project id, 6-30 of [a-z0-9-], starting
// with a letter, not ending in "-" (a domain-scoped "example.com:p" too).
func validProject(s string) bool {
	if domain, id, ok := strings.Cut(s, ":"); ok {
		return ValidHostname(domain) && validProject(id)
	}
	return len(s) >= 6 && len(s) <= 30 && ValidRegion(s)
}

// validAPIVersion: 1-32 of [A-Za-z0-9.-] ("2024-10-21", "2025-04-01-preview").
func validAPIVersion(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func (v *validator) endpoints(path string, b Backend) {
	if b.Endpoints == nil {
		return
	}
	if len(b.Endpoints) == 0 {
		v.add(path, "must list at least one endpoint, or be left out for the protocol's default")
		return
	}
	known := Endpoints(b.Protocol)
	if known == nil {
		return // the protocol is reported
	}
	for i, e := range b.Endpoints {
		at := path + "[" + strconv.Itoa(i) + "]"
		if !slices.Contains(known, e) {
			v.add(at, "unknown endpoint %q for protocol %q; expected one of %s", clip(e), b.Protocol, strings.Join(known, ", "))
		} else if j := slices.Index(b.Endpoints, e); j < i {
			v.add(at, "duplicate of endpoints[%d]", j)
		}
		v.realtimeEndpoint(at, e)
		v.liveEndpoint(at, e)
	}
}

// liveEndpoint refuses the Gemini Live endpoint in a schema 1 document,
// as realtimeEndpoint does the realtime one.
func (v *validator) liveEndpoint(at, e string) {
	if e == EndpointBidiGenerateContent {
		v.since(2, at)
	}
}

// realtimeEndpoint refuses the realtime endpoint in a schema 1 document:
// a node that reads only schema 1 does not know the name and would refuse
// the whole document.
func (v *validator) realtimeEndpoint(at, e string) {
	if e == EndpointRealtime {
		v.since(2, at)
	}
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// targetKey identifies a target within its model.
type targetKey struct{ backend, model string }

func (v *validator) models(ms []Model, backends map[string]int) {
	switch {
	case ms == nil:
		v.add("models", "required")
	case len(ms) == 0:
		v.add("models", "must list at least one model")
	}
	names := make(map[string]int, len(ms))
	seen := map[targetKey]int{} // reused per model
	for i, m := range ms {
		path := "models[" + strconv.Itoa(i) + "]"
		if msg := CheckModelName(m.Name); msg != "" {
			v.add(path+".name", "%s", msg)
		} else if msg := checkPatternName(m.Name); msg != "" {
			v.add(path+".name", "%s", msg)
		} else if j, dup := names[m.Name]; dup && IsPattern(m.Name) {
			// Two patterns with one prefix match the same names: neither
			// would be more specific than the other.
			v.add(path+".name", "duplicate of models[%d]: two patterns with the same prefix %q match the same names", j, strings.TrimSuffix(m.Name, Star))
		} else if dup {
			v.add(path+".name", "duplicate of models[%d]", j)
		} else {
			names[m.Name] = i
		}
		if m.PrefixAffinityOn() && !m.AffinityOn() {
			v.add(path+".prefix_affinity", "true needs affinity on (prefix affinity places by the same hash order)")
		}
		if len(m.Targets) == 0 {
			v.add(path+".targets", "must list at least one target (an empty pool can serve nothing)")
		}
		clear(seen)
		for j, t := range m.Targets {
			tpath := path + ".targets[" + strconv.Itoa(j) + "]"
			switch _, ok := backends[t.Backend]; {
			case !ValidID(t.Backend):
				v.add(tpath+".backend", "must be a backend id: %s", IDRule)
			case !ok:
				v.add(tpath+".backend", "unknown backend %q", t.Backend)
			}
			if msg := CheckModelName(t.Model); msg != "" {
				v.add(tpath+".model", "%s", msg)
			} else if msg := checkTargetModel(t.Model, IsPattern(m.Name)); msg != "" {
				v.add(tpath+".model", "%s", msg)
			}
			if t.Weight < 1 || t.Weight > MaxWeight {
				v.add(tpath+".weight", "must be 1..%d, got %d", MaxWeight, t.Weight)
			}
			if t.Tier < 0 || t.Tier > MaxTier {
				v.add(tpath+".tier", "must be 0..%d, got %d", MaxTier, t.Tier)
			}
			v.window(tpath, t)
			v.price(tpath+".price", t.Price)
			k := targetKey{t.Backend, t.Model}
			if first, dup := seen[k]; dup {
				v.add(tpath, "duplicate of targets[%d] (same backend and model); merge their weights", first)
			} else {
				seen[k] = j
			}
		}
	}
}

// IDRule says what [ValidID] accepts, for messages.
const IDRule = "1-64 characters from [A-Za-z0-9._-]"

// ValidID reports whether s is 1-64 characters from [A-Za-z0-9._-]: the
// rule for backend ids and credential names (and, on a node, for its own
// node id and egress proxy names). Ids that pass can be quoted in messages
// and logs as they are.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDLength {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckModelName returns what is wrong with a public or provider model
// name (1–[MaxModelNameLength] characters of valid UTF-8 without control
// characters), or "".
func CheckModelName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case utf8.RuneCountInString(s) > MaxModelNameLength:
		return fmt.Sprintf("longer than %d characters", MaxModelNameLength)
	case strings.ContainsFunc(s, unicode.IsControl):
		return "must not contain control characters"
	}
	return ""
}

// URLError says why [CheckBaseURL] rejected a URL. Msg never quotes the
// URL, which could carry credentials.
type URLError struct {
	Msg string
}

func (e *URLError) Error() string { return "routesnap: base_url: " + e.Msg }

// metadataHosts are names of cloud instance metadata services. A backend
// pointing at one would hand the node's credential, through the egress
// proxy, to a service that answers with cloud credentials (SSRF).
var metadataHosts = map[string]bool{
	"metadata":                   true, // GCE short name
	"metadata.google.internal":   true, // GCE
	"metadata.goog":              true, // GCE
	"instance-data":              true, // EC2 legacy name
	"instance-data.ec2.internal": true,
	"metadata.tencentyun.com":    true, // Tencent Cloud
}

// metadataAddrs are metadata service addresses outside the link-local
// ranges (which are rejected as a whole).
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("fd00:ec2::254"):   true, // EC2 IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud (legacy)
}

// CheckBaseURL reports whether raw is an acceptable backend base URL, and
// why not (a [*URLError]). The rules are the node's static-config rules
// (docs/egress.md) plus those that matter when a remote party writes the URL:
//
//   - an absolute http:// or https:// URL with a host, a port in 1..65535
//     if any, and no user info, query or fragment;
//   - http:// (plaintext) only for a loopback host: "localhost" or an IP
//     literal in 127.0.0.0/8 or ::1 (no name is resolved);
//   - not a link-local address (169.254.0.0/16, fe80::/10, where cloud
//     metadata services live, e.g. 169.254.169.254), not a known metadata
//     service name or address (metadata.google.internal, fd00:ec2::254, …),
//     in any IPv6 spelling that stands for one (IPv4-mapped, IPv4-
//     compatible, SIIT's IPv4-translated, NAT64, 6to4, Teredo, ISATAP:
//     [64:ff9b::a9fe:a9fe] is 169.254.169.254 behind a NAT64 gateway),
//     not an unspecified or multicast address;
//   - a host name is ASCII letters, digits, '-' and '_' in dot-separated
//     labels of 1–63 characters, and does not end in a numeric label (such
//     as "0251.254.169.254", which some resolvers read as an IPv4 address).
//
// The checks look at the URL only. A name that resolves to a forbidden
// address is not caught here; the egress proxy resolves names and is
// where destination policy belongs (docs/egress.md).
func CheckBaseURL(raw string) *URLError {
	fail := func(msg string) *URLError { return &URLError{Msg: msg} }
	const want = "expected an https:// URL (http:// only for a loopback host)"
	if raw == "" {
		return fail("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fail(want)
	case u.Opaque != "" || u.Host == "":
		return fail(want + " with a host")
	case u.User != nil:
		return fail("must not contain user info; the backend's credential is named by credential")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return fail("must not have a query or fragment")
	case strings.HasSuffix(u.Host, ":") || (u.Port() != "" && !validPort(u.Port())):
		return fail("invalid port; expected 1..65535")
	}
	host := u.Hostname()
	loopback := false
	// url.Parse has already checked that a bracketed host is an IPv6
	// literal; anything that is not an IP literal is a name.
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		switch {
		case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
			return fail("link-local address; not allowed (cloud metadata services live there)")
		case metadataAddrs[ip.WithZone("")]:
			return fail("cloud metadata service address; not allowed")
		case ip.IsUnspecified() || ip.IsMulticast():
			return fail("not a unicast address")
		}
		for _, v4 := range embeddedIPv4(ip) {
			switch {
			case v4.IsLinkLocalUnicast():
				return fail("IPv6 address embedding a link-local IPv4 address; not allowed (cloud metadata services live there)")
			case metadataAddrs[v4]:
				return fail("IPv6 address embedding a cloud metadata service address; not allowed")
			}
		}
		loopback = ip.IsLoopback()
	} else {
		name := strings.TrimSuffix(strings.ToLower(host), ".")
		switch {
		case !ValidHostname(name):
			return fail("invalid host name; expected ASCII letters, digits, '-' and '_' in dot-separated labels (IDNs in punycode)")
		case EndsInNumber(name):
			return fail("numeric host that is not a valid IP address")
		case metadataHosts[name]:
			return fail("cloud metadata service host; not allowed")
		}
		loopback = name == "localhost"
	}
	if u.Scheme == "http" && !loopback {
		return fail("plaintext http:// is only allowed for a loopback host (127.0.0.0/8, ::1, localhost); use https:// (docs/egress.md)")
	}
	return nil
}

// embeddedIPv4 returns the IPv4 addresses an IPv6 address stands for under
// the translation and tunnelling schemes a network path may apply: IPv4-
// compatible ::a.b.c.d (deprecated, still routed by some stacks), NAT64
// 64:ff9b::/96 (RFC 6052) and the local-use 64:ff9b:1::/48 (RFC 8215, the
// address in its last 32 bits, the common /96 layout), 6to4 2002::/16
// (RFC 3056, bits 16-47) and Teredo 2001::/32 (RFC 4380, the server in
// bits 32-63 and the client, inverted, in the last 32 bits). So
// [64:ff9b::a9fe:a9fe] or [2002:a9fe:a9fe::] is 169.254.169.254 for a
// NAT64 gateway or a 6to4 relay. IPv4-mapped ::ffff:a.b.c.d is unmapped
// before. It returns nil for any other address.
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	last := netip.AddrFrom4([4]byte(b[12:16]))
	switch {
	case [12]byte(b[:12]) == [12]byte{}:
		return []netip.Addr{last} // ::a.b.c.d
	case [12]byte(b[:12]) == [12]byte{0, 0x64, 0xff, 0x9b}:
		return []netip.Addr{last} // 64:ff9b::/96
	case [6]byte(b[:6]) == [6]byte{0, 0x64, 0xff, 0x9b, 0, 1}:
		return []netip.Addr{last} // 64:ff9b:1::/48
	case b[0] == 0x20 && b[1] == 0x02:
		return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))} // 2002:V4::/48
	case [10]byte(b[:10]) == [10]byte{8: 0xff, 9: 0xff} && b[10] == 0 && b[11] == 0:
		return []netip.Addr{last} // ::ffff:0:V4, SIIT's IPv4-translated
	case (b[8] == 0 || b[8] == 0x02) && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe:
		return []netip.Addr{last} // ISATAP interface identifier: PREFIX::[2]00:5efe:V4
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0:
		client := [4]byte(b[12:16])
		for i := range client {
			client[i] ^= 0xff
		}
		return []netip.Addr{netip.AddrFrom4([4]byte(b[4:8])), netip.AddrFrom4(client)} // Teredo
	}
	return nil
}

// ValidHostname reports whether name (lower case, without a trailing dot)
// is a syntactically valid DNS name.
func ValidHostname(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := range len(label) {
			switch c := label[i]; {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return true
}

// EndsInNumber reports whether the last label of name is a number (decimal,
// or hex with 0x): the WHATWG URL standard then parses the whole host as
// an IPv4 address, and so do inet_aton-based resolvers.
func EndsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if h, ok := strings.CutPrefix(last, "0x"); ok {
		last = h
		return strings.Trim(last, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// validPort reports whether p is a decimal port 1..65535 written without
// leading zeros.
func validPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0 && strconv.FormatUint(n, 10) == p
}
