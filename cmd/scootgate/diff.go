package main

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// Op is the kind of a Change.
type Op byte

// Ops, printed as the first character of a change line.
const (
	Added   Op = '+'
	Removed Op = '-'
	Changed Op = '~'
)

// Change is one difference between two snapshots.
type Change struct {
	Op Op
	// Kind is "backend", "model", "target", "key" or "tenant".
	Kind string
	// Name identifies the item: a backend id, a model name, a target as
	// "<model> -> <backend>/<provider model>", a key id or a tenant id.
	Name string
	// Detail describes an added item, or what changed ("weight 100 -> 90;
	// tier 0 -> 1"); "" for a removal.
	Detail string
}

func (c Change) String() string {
	s := string(c.Op) + " " + c.Kind + " " + c.Name
	switch {
	case c.Detail == "":
		return s
	case c.Op == Changed:
		return s + ": " + c.Detail
	default:
		return s + " (" + c.Detail + ")"
	}
}

// Diff lists the differences between two snapshots of one kind, for
// `scootgate check` and the control plane's CI. Changes are ordered by
// kind (backends, models, targets; or keys, tenants), then by name.
type Diff struct {
	Kind                   string // "routes" or "authz"
	OldVersion, NewVersion uint64
	Changes                []Change
}

// String renders the diff: a summary line, then one line per change.
func (d Diff) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: version %d -> %d: ", d.Kind, d.OldVersion, d.NewVersion)
	switch n := len(d.Changes); n {
	case 0:
		b.WriteString("no changes\n")
	case 1:
		b.WriteString("1 change\n")
	default:
		fmt.Fprintf(&b, "%d changes\n", n)
	}
	for _, c := range d.Changes {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// diffRoutes compares two routing snapshots. Targets are identified by
// model, backend and provider model (Validate makes that unique). The
// targets of an added or removed model are summarized in the model's line,
// not listed one by one. Pass validated snapshots; base URLs are printed
// without user info, query or fragment regardless.
func diffRoutes(old, new *routesnap.Snapshot) Diff {
	d := Diff{Kind: "routes", OldVersion: old.Version, NewVersion: new.Version}

	oldB := indexBy(old.Backends, func(b routesnap.Backend) string { return b.ID })
	newB := indexBy(new.Backends, func(b routesnap.Backend) string { return b.ID })
	for _, id := range unionKeys(oldB, newB) {
		o, inOld := oldB[id]
		n, inNew := newB[id]
		switch {
		case !inOld:
			summary := fmt.Sprintf("%s %s, credential %s, max_inflight_per_node %d",
				n.Protocol, redactURL(n.BaseURL), n.Credential, n.MaxInflightPerNode)
			if n.Endpoints != nil {
				summary += ", endpoints " + endpointList(n)
			}
			d.add(Added, "backend", id, summary)
		case !inNew:
			d.add(Removed, "backend", id, "")
		default:
			var ch changes
			ch.str("protocol", o.Protocol, n.Protocol)
			ch.str("base_url", redactURL(o.BaseURL), redactURL(n.BaseURL))
			ch.str("credential", o.Credential, n.Credential)
			ch.int("max_inflight_per_node", o.MaxInflightPerNode, n.MaxInflightPerNode)
			ch.str("endpoints", endpointList(o), endpointList(n))
			d.changed("backend", id, ch)
		}
	}

	oldM := indexBy(old.Models, func(m routesnap.Model) string { return m.Name })
	newM := indexBy(new.Models, func(m routesnap.Model) string { return m.Name })
	var targets []Change
	for _, name := range unionKeys(oldM, newM) {
		o, inOld := oldM[name]
		n, inNew := newM[name]
		switch {
		case !inOld:
			summary := plural(len(n.Targets), "target")
			if !n.AffinityOn() {
				summary += ", affinity off"
			}
			if n.PrefixAffinityOn() {
				summary += ", prefix affinity"
			}
			if n.Fallbacks != nil {
				summary += ", fallbacks " + strings.Join(n.Fallbacks, ",")
			}
			d.add(Added, "model", name, summary)
		case !inNew:
			d.add(Removed, "model", name, plural(len(o.Targets), "target"))
		default:
			var ch changes
			ch.bool("affinity", o.AffinityOn(), n.AffinityOn())
			ch.bool("prefix_affinity", o.PrefixAffinityOn(), n.PrefixAffinityOn())
			ch.str("fallbacks", fallbackList(o), fallbackList(n))
			d.changed("model", name, ch)
			targets = append(targets, diffTargets(name, o.Targets, n.Targets)...)
		}
	}
	d.Changes = append(d.Changes, targets...)
	return d
}

// endpointList names the endpoints a backend serves, its protocol's
// default when it lists none.
func endpointList(b routesnap.Backend) string {
	list := b.Endpoints
	if list == nil {
		list = routesnap.Endpoints(b.Protocol)[:1]
	}
	return strings.Join(list, ",")
}

func diffTargets(model string, old, new []routesnap.Target) []Change {
	key := func(t routesnap.Target) string { return model + " -> " + t.Backend + "/" + t.Model }
	oldT, newT := indexBy(old, key), indexBy(new, key)
	var d Diff
	for _, k := range unionKeys(oldT, newT) {
		o, inOld := oldT[k]
		n, inNew := newT[k]
		switch {
		case !inOld:
			d.add(Added, "target", k, targetSummary(n))
		case !inNew:
			d.add(Removed, "target", k, "")
		default:
			var ch changes
			ch.int("weight", o.Weight, n.Weight)
			ch.bool("stream", o.Stream, n.Stream)
			ch.bool("tools", o.Tools, n.Tools)
			ch.bool("json_schema", o.JSONSchema, n.JSONSchema)
			ch.int("tier", o.Tier, n.Tier)
			ch.str("context_window", tokens(o.ContextWindow), tokens(n.ContextWindow))
			ch.str("max_output_tokens", tokens(o.MaxOutputTokens), tokens(n.MaxOutputTokens))
			ch.str("price", priceText(o.Price), priceText(n.Price))
			d.changed("target", k, ch)
		}
	}
	return d.Changes
}

func targetSummary(t routesnap.Target) string {
	parts := []string{"weight " + strconv.Itoa(t.Weight)}
	if t.Stream {
		parts = append(parts, "stream")
	}
	if t.Tools {
		parts = append(parts, "tools")
	}
	if t.JSONSchema {
		parts = append(parts, "json_schema")
	}
	if t.Tier != 0 {
		parts = append(parts, "tier "+strconv.Itoa(t.Tier))
	}
	if t.ContextWindow != nil {
		parts = append(parts, "context_window "+strconv.Itoa(*t.ContextWindow))
	}
	if t.MaxOutputTokens != nil {
		parts = append(parts, "max_output_tokens "+strconv.Itoa(*t.MaxOutputTokens))
	}
	if t.Price != nil {
		parts = append(parts, "price "+priceText(t.Price))
	}
	return strings.Join(parts, ", ")
}

// fallbackList names a model's fallbacks in order, "none" without any.
func fallbackList(m routesnap.Model) string {
	if len(m.Fallbacks) == 0 {
		return "none"
	}
	return strings.Join(m.Fallbacks, ",")
}

// tokens renders an optional token count, "none" when not declared.
func tokens(n *int) string {
	if n == nil {
		return "none"
	}
	return strconv.Itoa(*n)
}

// priceText renders a target's price in USD per million tokens, as the
// document writes it: "in 3 out 15 cache_read 0.3 cache_write 3.75
// (above 200000 input tokens: in 6 out 22.5)", or "none".
func priceText(p *routesnap.Price) string {
	if p == nil {
		return "none"
	}
	rates := func(in, out, cr, cw string) string {
		s := "in " + in + " out " + out
		if cr != "" {
			s += " cache_read " + cr
		}
		if cw != "" {
			s += " cache_write " + cw
		}
		return s
	}
	s := rates(p.Input, p.Output, p.CacheRead, p.CacheWrite)
	if lc := p.LongContext; lc != nil {
		s += " (above " + strconv.FormatInt(lc.AboveInputTokens, 10) + " input tokens: " + rates(lc.Input, lc.Output, lc.CacheRead, lc.CacheWrite) + ")"
	}
	return s
}

// diffAuthz compares two authorization snapshots by key id, then their
// tenants' limits by tenant id. A changed digest is reported as "digest
// changed", never with either digest.
func diffAuthz(old, new *authsnap.Snapshot) Diff {
	d := Diff{Kind: "authz", OldVersion: old.Version, NewVersion: new.Version}
	oldK := indexBy(old.Keys, func(k authsnap.Key) string { return k.KeyID })
	newK := indexBy(new.Keys, func(k authsnap.Key) string { return k.KeyID })
	for _, id := range unionKeys(oldK, newK) {
		o, inOld := oldK[id]
		n, inNew := newK[id]
		switch {
		case !inOld:
			detail := "tenant " + n.TenantID + ", models " + allowlist(n.Models) + ", expires " + expiry(n.ExpiresAt)
			if n.Disabled {
				detail += ", disabled"
			}
			if !n.Limits.IsZero() {
				detail += ", limits " + limits(n.Limits)
			}
			d.add(Added, "key", id, detail)
		case !inNew:
			d.add(Removed, "key", id, "")
		default:
			var ch changes
			if o.Digest != n.Digest {
				ch = append(ch, "digest changed")
			}
			ch.str("tenant", o.TenantID, n.TenantID)
			ch.str("models", allowlist(o.Models), allowlist(n.Models))
			ch.str("expires", expiry(o.ExpiresAt), expiry(n.ExpiresAt))
			ch.bool("disabled", o.Disabled, n.Disabled)
			ch.str("limits", limits(o.Limits), limits(n.Limits))
			d.changed("key", id, ch)
		}
	}
	oldT := indexBy(old.Tenants, func(t authsnap.Tenant) string { return t.TenantID })
	newT := indexBy(new.Tenants, func(t authsnap.Tenant) string { return t.TenantID })
	for _, id := range unionKeys(oldT, newT) {
		o, inOld := oldT[id]
		n, inNew := newT[id]
		switch {
		case !inOld:
			d.add(Added, "tenant", id, "limits "+limits(n.Limits))
		case !inNew:
			// Its keys keep working without tenant limits (docs/limits.md).
			d.add(Removed, "tenant", id, "")
		default:
			var ch changes
			ch.str("limits", limits(o.Limits), limits(n.Limits))
			d.changed("tenant", id, ch)
		}
	}
	return d
}

// limits renders a limits object compactly: "rpm 60, tpm 100000,
// concurrent 4", or "none".
func limits(l authsnap.Limits) string {
	var parts []string
	if l.RequestsPerMinute > 0 {
		parts = append(parts, "rpm "+strconv.FormatInt(l.RequestsPerMinute, 10))
	}
	if l.TokensPerMinute > 0 {
		parts = append(parts, "tpm "+strconv.FormatInt(l.TokensPerMinute, 10))
	}
	if l.MaxConcurrent > 0 {
		parts = append(parts, "concurrent "+strconv.FormatInt(l.MaxConcurrent, 10))
	}
	if l.USDPerDay != "" {
		parts = append(parts, "usd/day "+l.USDPerDay)
	}
	if l.USDPerMonth != "" {
		parts = append(parts, "usd/month "+l.USDPerMonth)
	}
	if l.BudgetMode != "" {
		parts = append(parts, "budget_mode "+l.BudgetMode)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func allowlist(models []string) string {
	if models == nil {
		return "all"
	}
	return "[" + strings.Join(models, " ") + "]"
}

func expiry(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

func (d *Diff) add(op Op, kind, name, detail string) {
	d.Changes = append(d.Changes, Change{Op: op, Kind: kind, Name: name, Detail: detail})
}

func (d *Diff) changed(kind, name string, ch changes) {
	if len(ch) > 0 {
		d.add(Changed, kind, name, strings.Join(ch, "; "))
	}
}

// changes collects "field old -> new" descriptions.
type changes []string

func (c *changes) str(field, old, new string) {
	if old != new {
		*c = append(*c, field+" "+old+" -> "+new)
	}
}

func (c *changes) int(field string, old, new int) {
	c.str(field, strconv.Itoa(old), strconv.Itoa(new))
}

func (c *changes) bool(field string, old, new bool) {
	c.str(field, strconv.FormatBool(old), strconv.FormatBool(new))
}

// indexBy maps each element of s by key; for duplicate keys (an invalid
// snapshot) the first wins.
func indexBy[T any](s []T, key func(T) string) map[string]T {
	m := make(map[string]T, len(s))
	for _, v := range s {
		k := key(v)
		if _, dup := m[k]; !dup {
			m[k] = v
		}
	}
	return m
}

// unionKeys returns the keys of a and b, sorted.
func unionKeys[T any](a, b map[string]T) []string {
	keys := make([]string, 0, max(len(a), len(b)))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// redactURL drops user info, query and fragment from a URL for printing;
// an unparsable one is not printed at all.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}
