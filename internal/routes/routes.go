// Package routes compiles backends and public models into an immutable
// routing Table and publishes it through a Holder.
//
// # Basics
//
// A Table is built once, validated whole, then stored with one atomic
// pointer write. A request calls Holder.Load once at entry and uses only
// that Table for its whole life, so a later swap never changes an
// in-flight request (docs/snapshots.md).
//
// Each public model keeps one candidate pool per endpoint (chat
// completions, messages, responses, …): a backend is in the pools of the
// endpoints it serves, and since every endpoint belongs to one protocol the
// OpenAI-compatible and Anthropic pools are never mixed (docs/api.md). Each
// tier of a pool carries a WeightIndex, so that pickers draw a target by
// weight without scanning the tier.
//
// # Caveats
//
// Backends point at upstream.State values owned by a Registry outside the
// Table, so hot state survives a swap for unchanged backends.
package routes

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

// Caps is a set of capabilities (docs/routing.md "Capabilities"); see [provider.Caps].
type Caps = provider.Caps

// The capabilities, as named in the provider package.
const (
	CapStream     = provider.CapStream
	CapTools      = provider.CapTools
	CapJSONSchema = provider.CapJSONSchema
)

// Backend is one provider endpoint. Immutable.
type Backend struct {
	ID       string
	Protocol provider.Protocol
	// Endpoints is the set of endpoints the backend serves.
	Endpoints provider.EndpointSet
	// URL is, for each endpoint in Endpoints, the base URL with the
	// endpoint's upstream path appended ("" for the others).
	URL [provider.NumEndpoints]string
	// Upstream is URL parsed (nil where URL is ""), so that a request is
	// built without parsing it again. Shared by every request to the
	// backend: read-only, copy it to change it.
	Upstream   [provider.NumEndpoints]*url.URL
	Credential secret.Secret
	// Auth is how Credential is sent (the credential's auth_header);
	// credential.AuthDefault: as the protocol sends it.
	Auth  credential.AuthHeader
	State *upstream.State
	// InjectUsage is true for an OpenAI backend whose include_usage is on
	// (the default): the node may ask it for stream usage the client did
	// not request (docs/usage-events.md). Always false for Anthropic. It is not part of
	// the backend's identity: changing it keeps the hot state.
	InjectUsage bool

	// Platform is how the protocol travels (docs/routing.md
	// "Platforms"): FirstParty, or a cloud platform whose envelope
	// (provider.Spec.Envelopes) makes each attempt's URL and body.
	Platform provider.Platform
	// PlatformName is Platform's name for usage events and metrics, and
	// Region the platform's region or location, "" where it has none.
	PlatformName, Region string
	// Base is the base URL (without trailing "/"), for an envelope that
	// builds each attempt's URL from it.
	Base *url.URL
	// Signer, for a credential that signs requests (aws), signs every
	// request to the backend; nil: the credential is sent as a value.
	Signer *credential.SigV4
	// Token, for a credential whose value is minted (gcp_service_account),
	// gives each attempt the token it sends in place of Credential; nil:
	// Credential is the value.
	Token credential.Bearer
}

// Target binds a public model to a backend. Immutable.
type Target struct {
	Backend       *Backend
	ProviderModel string
	// ProviderModelJSON is ProviderModel as a JSON string literal, ready
	// for the byte-faithful rewrite of the request's "model".
	ProviderModelJSON []byte
	// ProviderModelNamedJSON is "models/" + ProviderModel as a JSON string
	// literal, for the bodies that name the model that way
	// (provider.Request.Named).
	ProviderModelNamedJSON []byte
	// Upstream is the provider URL of this target's endpoint when the
	// endpoint's path names the model (provider.Spec.Match): the
	// backend's URL with the provider model in it. nil otherwise: the
	// backend's Upstream serves every model.
	Upstream *url.URL
	Weight   int
	Caps     Caps
	Tier     int
	// TierWeights indexes the weights of this target's tier of its pool;
	// every target of the tier shares it. Compile sets it (IndexWeights);
	// nil means unset, and pickers then scan the tier.
	TierWeights *WeightIndex
	// HashID is TargetHash(Backend.ID, ProviderModel): the target's
	// identity for rendezvous hashing, the same on every node that holds
	// the same table. Compile sets it.
	HashID uint64
	// Price is what the target's tokens cost (docs/routing.md "Prices"),
	// nil when unpriced. It travels with the routed target, so an attempt
	// is priced by the table its request was routed with.
	Price *Price
	// Templated says that ProviderModel holds a "*" (a pattern's target,
	// docs/routing.md "Aliases and patterns"): the model sent is made per
	// request from the part of the asked name the pattern's star matched
	// ([Target.Resolve]), and the JSON and URL fields above are unset.
	Templated bool

	// ContextWindow and MaxOutput are the target's declared context
	// window and output cap in tokens, 0 when not declared
	// (docs/routing.md "Context windows"; [Target.Holds]).
	ContextWindow, MaxOutput int64
}

// Holds reports whether t can hold a request expected to have input
// tokens of input and asking for up to output tokens of output: within
// its context window together, and the output within its output cap,
// for whichever of the two it declares.
func (t *Target) Holds(input, output int64) bool {
	return (t.ContextWindow == 0 || input+output <= t.ContextWindow) && (t.MaxOutput == 0 || output <= t.MaxOutput)
}

// Price is a target's compiled price: picodollars a token, and the
// version of the routing snapshot that set it (0 for the static
// configuration), the price's identity in usage events.
type Price struct {
	usd.Price
	Version uint64
}

// SetVersion records v, the routing snapshot's version, as the identity
// of every price of t. Call it before the table is shared (Holder.Store).
func (t *Table) SetVersion(v uint64) {
	for _, p := range t.prices {
		p.Version = v
	}
}

// Resolved is what an attempt sends to a target: the provider model, as a
// JSON string and as the JSON string "models/{model}", and the URL of the
// endpoint.
type Resolved struct {
	Model     string
	JSON      []byte
	NamedJSON []byte
	URL       *url.URL // nil: the backend does not serve the endpoint
}

// Resolve returns what an attempt on endpoint e sends to t for a request
// whose pattern's star matched star ("" for an exact name). For a target
// that is not templated it is the compiled values and allocates nothing;
// a templated one builds them from [routesnap.Expand].
func (t *Target) Resolve(star string, e provider.Endpoint) (Resolved, error) {
	if !t.Templated {
		u := t.Upstream
		if u == nil {
			u = t.Backend.Upstream[e]
		}
		return Resolved{Model: t.ProviderModel, JSON: t.ProviderModelJSON, NamedJSON: t.ProviderModelNamedJSON, URL: u}, nil
	}
	r := Resolved{Model: routesnap.Expand(t.ProviderModel, star), URL: t.Backend.Upstream[e]}
	var err error
	if r.JSON, err = json.Marshal(r.Model); err != nil {
		return Resolved{}, err
	}
	if r.NamedJSON, err = json.Marshal("models/" + r.Model); err != nil {
		return Resolved{}, err
	}
	if catalog.Spec(e).Match != nil && t.Backend.URL[e] != "" {
		if r.URL, err = parseUpstream(t.Backend.URL[e], r.Model); err != nil {
			return Resolved{}, err
		}
	}
	return r, nil
}

// Model is a public model with one candidate pool per endpoint: the
// targets whose backend serves that endpoint. A target of a backend that
// serves several endpoints is in each of their pools (one Target value per
// pool, sharing the Backend and so its hot state).
type Model struct {
	Name  string
	Pools [provider.NumEndpoints][]*Target // sorted by tier, then backend id
	// Affinity: requests that name a session are placed by rendezvous
	// hashing (docs/routing.md "Affinity").
	Affinity bool
	// PrefixAffinity: a request that names no session is placed by the
	// hash of its prompt's beginning (docs/routing.md "Prefix affinity").
	PrefixAffinity bool
	// Pattern says that Name is a pattern (docs/routing.md "Aliases and
	// patterns"): Prefix followed by "*". It matches the asked names that
	// start with Prefix and go on for at least one character; the rest is
	// what the star stands for in its targets' models ([Model.Star]).
	Pattern bool
	Prefix  string

	// Chain is the models that serve a request none of this model's
	// targets can take before sending, in the order they are tried
	// (docs/routing.md "Fallbacks"): each fallback, followed by its own
	// chain, every model once. Exact models only, of the protocol of this
	// model's targets; nil without fallbacks.
	Chain []*Model
	// Windowed says that some target of the model declares a context
	// window or an output cap: only then does a request's size decide
	// which targets may take it ([Target.Holds]).
	Windowed bool
}

// Star returns the part of the asked name that m's star matched: "" for
// an exact model. name must be one m matched ([Table.Model]).
func (m *Model) Star(name string) string {
	if !m.Pattern {
		return ""
	}
	return name[len(m.Prefix):]
}

// Serves reports whether the model has a target of protocol p, for any
// endpoint.
func (m *Model) Serves(p provider.Protocol) bool {
	for e := range provider.NumEndpoints {
		if e.Protocol() == p && len(m.Pools[e]) > 0 {
			return true
		}
	}
	return false
}

// Table is a compiled, immutable routing table.
type Table struct {
	uses   map[upstream.Identity]struct{} // backend identities this table routes to
	models map[string]*Model              // the exact names
	// patterns are the pattern models, longest prefix first: the first
	// that matches a name is the most specific.
	patterns []*Model
	names    [provider.NumProtocols][]string // sorted exact names of models with a target of that protocol
	prices   []*Price                        // every target's price, for SetVersion
}

// Model returns the public model a request that asks for name uses: the
// model of that exact name, otherwise the pattern with the longest prefix
// that matches it (docs/routing.md "Aliases and patterns"). A pattern
// matches only names that would be valid model names in the routes
// ([routesnap.CheckModelName]: at most [routesnap.MaxModelNameLength]
// characters of UTF-8 without control characters), so that what its star
// stands for, sent to the provider and written into usage events, is
// one. An exact name costs one map lookup, as it did before patterns.
func (t *Table) Model(name string) (*Model, bool) {
	if m, ok := t.models[name]; ok {
		return m, true
	}
	if len(t.patterns) == 0 || len(name) > utf8.UTFMax*routesnap.MaxModelNameLength || routesnap.CheckModelName(name) != "" {
		return nil, false
	}
	for _, m := range t.patterns {
		if len(name) > len(m.Prefix) && strings.HasPrefix(name, m.Prefix) {
			return m, true
		}
	}
	return nil, false
}

// Entry returns the model entry named name as the routes name it, exact
// name or pattern ("claude-*" is the pattern, not a name it matches).
func (t *Table) Entry(name string) (*Model, bool) {
	if !routesnap.IsPattern(name) {
		m, ok := t.models[name]
		return m, ok
	}
	for _, m := range t.patterns {
		if m.Name == name {
			return m, true
		}
	}
	return nil, false
}

// Uses reports whether the table routes to the backend with identity id;
// after a swap, Registry.Prune(newTable.Uses) releases removed backends'
// state once their last request ends (docs/snapshots.md).
func (t *Table) Uses(id upstream.Identity) bool {
	_, ok := t.uses[id]
	return ok
}

// Names returns the sorted exact public model names that have at least
// one target speaking p, for any of its endpoints; patterns are not names
// a client can list (docs/api.md "Client surface details"). The slice
// must not be modified.
func (t *Table) Names(p provider.Protocol) []string { return t.names[p] }

// platform sets a compiled backend's platform coordinates: its name and
// region, its parsed base URL, and a signer for a credential that signs.
func platform(cb *Backend, b routesnap.Backend, cred credential.Credential) error {
	cb.PlatformName = cb.Platform.Name(cb.Protocol)
	cb.Region = b.Region + b.Location // at most one is set (routesnap)
	base, err := url.Parse(strings.TrimRight(b.BaseURL, "/"))
	if err != nil {
		return fmt.Errorf("routes: backend %q: base_url: not a valid URL", b.ID)
	}
	if b.APIVersion != "" {
		// Azure's deployment surface (openai.AzureURL).
		base.RawQuery = "api-version=" + url.QueryEscape(b.APIVersion)
	}
	cb.Base = base
	if cb.Platform == provider.Vertex {
		// Every Vertex URL is under the backend's project and location.
		cb.Base = provider.VertexResource(base, b.Project, b.Location)
	}
	if only, _ := credential.PlatformOf(cred.Kind); only != "" && cb.PlatformName != only {
		// A minted token is for one cloud's resources only (the
		// credential.Policy reports it first, at the document's path).
		return fmt.Errorf("routes: backend %q: credential %q is a %s credential, which only platform %q takes", b.ID, b.Credential, cred.Kind, only)
	}
	cb.Token = cred.Token
	if cred.AWS == nil {
		return nil
	}
	// An envelope that signs names its service; every endpoint of one
	// platform signs for the same one.
	for e := range provider.NumEndpoints {
		if env := catalog.Spec(e).Envelopes[cb.Platform]; env != nil && env.SigningName != "" && e.Protocol() == cb.Protocol {
			cb.Signer = cred.AWS.Signer(env.SigningName, b.Region, time.Now)
			return nil
		}
	}
	return fmt.Errorf("routes: backend %q: credential %q signs requests, which platform %q does not take", b.ID, b.Credential, cb.PlatformName)
}

// Compile builds a Table from routes that passed
// [routesnap.ValidateRoutes] with creds as the defined credentials and the
// node's [credential.Policy]: a routing snapshot's, or a node's static
// configuration, which decodes into the same types. reg supplies the hot
// state of each backend by identity. The few problems that would make the
// Table unusable are errors here too, and so is a credential paired with a
// host it does not list: this is where a backend gets its credential, so
// no table can send one elsewhere (docs/egress.md "Where a credential may
// go"). Validation reports them all, with the paths of the document they
// came from.
//
// A backend keeps its hot state (in-flight count, EWMA, breaker, disabled)
// across tables as long as its identity is unchanged: id, protocol, base
// URL (without trailing "/"), credential name and max_inflight_per_node
// ([upstream.Identity]); include_usage is not part of it.
func Compile(bs []routesnap.Backend, ms []routesnap.Model, creds map[string]credential.Credential, reg *upstream.Registry) (*Table, error) {
	backends := make(map[string]*Backend, len(bs))
	uses := make(map[upstream.Identity]struct{}, len(bs))
	for i, b := range bs {
		p, ok := provider.ParseProtocol(b.Protocol)
		if !ok {
			return nil, fmt.Errorf("routes: backend %q: unknown protocol %q", b.ID, b.Protocol)
		}
		cred, ok := creds[b.Credential]
		if !ok {
			return nil, fmt.Errorf("routes: backend %q: unknown credential %q", b.ID, b.Credential)
		}
		u, err := url.Parse(b.BaseURL)
		if err != nil {
			// The URL is not quoted: it could carry credentials.
			return nil, fmt.Errorf("routes: backends[%d].base_url: not a valid URL", i)
		}
		if !cred.Allows(u.Hostname()) {
			return nil, fmt.Errorf("routes: backend %q: credential %q may not be sent to host %q", b.ID, b.Credential, credential.Host(u.Hostname()))
		}
		// The endpoint path is appended, so "…/v1/" and "…/v1" are one URL.
		base := strings.TrimRight(u.String(), "/")
		pl, ok := provider.ParsePlatform(b.Platform, p)
		if !ok {
			return nil, fmt.Errorf("routes: backend %q: platform %q does not carry protocol %s", b.ID, b.Platform, p)
		}
		id := upstream.Identity{ID: b.ID, Protocol: b.Protocol, BaseURL: base, Credential: b.Credential, Cap: b.MaxInflightPerNode}
		if pl != provider.FirstParty {
			id.Platform = pl.Name(p) + "/" + b.Region + b.Project + "/" + b.Location + b.APIVersion
		}
		uses[id] = struct{}{}
		cb := &Backend{
			ID:          b.ID,
			Protocol:    p,
			Endpoints:   provider.DefaultEndpoints(p),
			Credential:  cred.Secret,
			Auth:        cred.Auth,
			State:       reg.Get(id),
			InjectUsage: p == provider.OpenAI && (b.IncludeUsage == nil || *b.IncludeUsage),
			Platform:    pl,
		}
		if err := platform(cb, b, cred); err != nil {
			return nil, err
		}
		if b.Endpoints != nil {
			// Validation checked the names against the protocol; the
			// endpoints are not part of the identity, like include_usage.
			cb.Endpoints = 0
			for _, name := range b.Endpoints {
				e, ok := provider.ParseEndpoint(name)
				if !ok || e.Protocol() != p {
					return nil, fmt.Errorf("routes: backend %q: endpoint %q is not one of protocol %s", b.ID, name, p)
				}
				cb.Endpoints |= e.Set()
			}
		}
		for e := range provider.NumEndpoints {
			if cb.Endpoints.Has(e) && pl != provider.FirstParty && catalog.Spec(e).Envelopes[pl] == nil {
				return nil, fmt.Errorf("routes: backend %q: this node does not carry endpoint %s on platform %s yet", b.ID, e, b.Platform)
			}
			if cb.Endpoints.Has(e) {
				cb.URL[e] = base + catalog.Spec(e).UpstreamPath
				eu, err := parseUpstream(cb.URL[e], "")
				if err != nil {
					return nil, fmt.Errorf("routes: backends[%d].base_url: not a valid URL with the path of %s", i, e)
				}
				cb.Upstream[e] = eu
			}
		}
		backends[b.ID] = cb
	}
	t := &Table{uses: uses, models: make(map[string]*Model, len(ms))}
	for _, m := range ms {
		cm := &Model{Name: m.Name, Affinity: m.AffinityOn(), PrefixAffinity: m.AffinityOn() && m.PrefixAffinityOn()}
		if routesnap.IsPattern(m.Name) {
			cm.Pattern, cm.Prefix = true, strings.TrimSuffix(m.Name, routesnap.Star)
		}
		for i, tg := range m.Targets {
			b, ok := backends[tg.Backend]
			if !ok {
				return nil, fmt.Errorf("routes: models.%q.targets[%d]: unknown backend %q", m.Name, i, tg.Backend)
			}
			if tg.Weight <= 0 {
				return nil, fmt.Errorf("routes: models.%q.targets[%d]: weight must be > 0", m.Name, i)
			}
			templated := strings.Contains(tg.Model, routesnap.Star)
			if templated && !cm.Pattern {
				return nil, fmt.Errorf("routes: models.%q.targets[%d]: model %q has a \"*\" but the model is no pattern", m.Name, i, tg.Model)
			}
			var quoted, named []byte
			if !templated {
				var err error
				if quoted, err = json.Marshal(tg.Model); err != nil {
					return nil, fmt.Errorf("routes: models.%q.targets[%d]: %w", m.Name, i, err)
				}
				if named, err = json.Marshal("models/" + tg.Model); err != nil {
					return nil, fmt.Errorf("routes: models.%q.targets[%d]: %w", m.Name, i, err)
				}
			}
			var caps Caps
			if tg.Stream {
				caps |= CapStream
			}
			if tg.Tools {
				caps |= CapTools
			}
			if tg.JSONSchema {
				caps |= CapJSONSchema
			}
			var price *Price
			if tg.Price != nil {
				price = &Price{Price: tg.Price.Parse()}
				t.prices = append(t.prices, price)
			}
			for e := range provider.NumEndpoints {
				if !b.Endpoints.Has(e) {
					continue
				}
				target := &Target{
					Backend: b, ProviderModel: tg.Model, ProviderModelJSON: quoted, ProviderModelNamedJSON: named,
					Weight: tg.Weight, Caps: caps, Tier: tg.Tier, Price: price,
					HashID: TargetHash(b.ID, tg.Model), Templated: templated,
					ContextWindow: tokens(tg.ContextWindow), MaxOutput: tokens(tg.MaxOutputTokens),
				}
				cm.Windowed = cm.Windowed || target.ContextWindow > 0 || target.MaxOutput > 0
				if catalog.Spec(e).Match != nil && !templated {
					var err error
					if target.Upstream, err = parseUpstream(b.URL[e], tg.Model); err != nil {
						return nil, fmt.Errorf("routes: models.%q.targets[%d]: model %q does not make a valid URL", m.Name, i, tg.Model)
					}
				}
				cm.Pools[e] = append(cm.Pools[e], target)
			}
		}
		for e := range cm.Pools {
			pool := cm.Pools[e]
			sort.SliceStable(pool, func(i, j int) bool {
				if pool[i].Tier != pool[j].Tier {
					return pool[i].Tier < pool[j].Tier
				}
				return pool[i].Backend.ID < pool[j].Backend.ID
			})
			IndexWeights(pool)
		}
		if cm.Pattern {
			t.patterns = append(t.patterns, cm)
			continue
		}
		for p := range provider.NumProtocols {
			if cm.Serves(p) {
				t.names[p] = append(t.names[p], m.Name)
			}
		}
		t.models[m.Name] = cm
	}
	for p := range t.names {
		sort.Strings(t.names[p])
	}
	if err := t.chain(ms); err != nil {
		return nil, err
	}
	// Longest prefix first. Two patterns whose prefixes have one length
	// match no name in common unless the prefixes are equal, which
	// validation refuses: their order does not matter.
	sort.Slice(t.patterns, func(i, j int) bool { return len(t.patterns[i].Prefix) > len(t.patterns[j].Prefix) })
	return t, nil
}

// chain sets the Chain of every model of ms that names fallbacks: each
// fallback, then its own chain, depth first, every model once (so a
// chain is walked once whatever its shape; validation refuses cycles).
func (t *Table) chain(ms []routesnap.Model) error {
	fallbacks := make(map[*Model][]string, len(ms))
	for _, m := range ms {
		if m.Fallbacks != nil {
			cm, _ := t.Entry(m.Name)
			fallbacks[cm] = m.Fallbacks
		}
	}
	for cm := range fallbacks {
		seen := map[*Model]bool{cm: true}
		var walk func(names []string) error
		walk = func(names []string) error {
			for _, name := range names {
				f, ok := t.models[name] // exact names only
				if !ok {
					return fmt.Errorf("routes: models.%q.fallbacks: unknown model %q", cm.Name, name)
				}
				if seen[f] {
					continue
				}
				seen[f] = true
				cm.Chain = append(cm.Chain, f)
				if err := walk(fallbacks[f]); err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(fallbacks[cm]); err != nil {
			return err
		}
	}
	return nil
}

// tokens is an optional token count of the routes, 0 when not declared.
func tokens(n *int) int64 {
	if n == nil {
		return 0
	}
	return int64(*n)
}

// TargetHash is a stable 64-bit hash of a target's identity: its backend
// id and provider model (FNV-1a, then a finaliser that spreads every input
// bit over the result). It depends on nothing else, so that every node
// computes the same value for the same table, whatever its pointers, order
// or process.
func TargetHash(backendID, providerModel string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(backendID); i++ {
		h = (h ^ uint64(backendID[i])) * prime
	}
	h = (h ^ 0xff) * prime // no UTF-8 text holds 0xff: ("ab","c") ≠ ("a","bc")
	for i := 0; i < len(providerModel); i++ {
		h = (h ^ uint64(providerModel[i])) * prime
	}
	return Mix64(h)
}

// Mix64 is the splitmix64 finaliser: a bijection of uint64 whose every
// output bit depends on every input bit.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Holder publishes the current Table. The zero value holds none.
type Holder struct {
	p atomic.Pointer[Table]
}

// Load returns the current table, or nil before the first Store.
func (h *Holder) Load() *Table { return h.p.Load() }

// Store publishes t; requests that already loaded the old table keep it.
func (h *Holder) Store(t *Table) { h.p.Store(t) }

// parseUpstream parses an upstream URL, with model, path-escaped, in place
// of "{model}" when the endpoint's path names the model.
func parseUpstream(raw, model string) (*url.URL, error) {
	if model != "" {
		raw = strings.Replace(raw, "{model}", url.PathEscape(model), 1)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	// As http.NewRequest: "host:" is "host".
	u.Host = strings.TrimSuffix(u.Host, ":")
	return u, nil
}
