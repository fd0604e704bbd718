package routes

import (
	"fmt"
	"testing"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// largeSnapshot returns a valid snapshot with models × targets targets
// spread over 64 backends of both protocols.
func largeSnapshot(models, targets int) *routesnap.Snapshot {
	const backends = 64
	s := &routesnap.Snapshot{Schema: 1, Version: 1}
	for i := range backends {
		proto := routesnap.ProtocolOpenAI
		if i%4 == 3 {
			proto = routesnap.ProtocolAnthropic
		}
		s.Backends = append(s.Backends, routesnap.Backend{
			ID: fmt.Sprintf("backend-%02d", i), Protocol: proto, BaseURL: fmt.Sprintf("https://p%d.example.com/v1", i),
			Credential: fmt.Sprintf("cred-%d", i%3), MaxInflightPerNode: 256,
		})
	}
	for i := range models {
		m := routesnap.Model{Name: fmt.Sprintf("public-model-%05d", i)}
		for j := range targets {
			m.Targets = append(m.Targets, routesnap.Target{
				Backend: fmt.Sprintf("backend-%02d", (i+j*7)%backends), Model: fmt.Sprintf("provider-model-%05d-%d", i, j),
				Weight: 10 * (j + 1), Stream: true, Tools: j%2 == 0, Tier: j / 2,
			})
		}
		s.Models = append(s.Models, m)
	}
	return s
}

var benchCreds = map[string]credential.Credential{
	"cred-0": {Secret: secret.New("a"), Hosts: []string{"*.example.com"}},
	"cred-1": {Secret: secret.New("b"), Hosts: []string{"*.example.com"}},
	"cred-2": {Secret: secret.New("c"), Hosts: []string{"*.example.com"}},
}

// BenchmarkCompile measures what compiling a validated routing snapshot
// costs (the poller validates and compiles off the request path, which
// only loads the Holder's pointer).
func BenchmarkCompile(b *testing.B) {
	for _, size := range []struct{ models, targets int }{{100, 3}, {10000, 3}} {
		doc := largeSnapshot(size.models, size.targets)
		b.Run(fmt.Sprintf("models=%d/targets=%d", size.models, size.targets), func(b *testing.B) {
			reg := upstream.NewRegistry(upstream.Options{})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(doc.Backends, doc.Models, benchCreds, reg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestLargeSnapshotCompiles(t *testing.T) {
	doc := largeSnapshot(1000, 3)
	if err := doc.ValidateCredentials(hasCred(benchCreds)); err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(doc.Backends, doc.Models, benchCreds, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tab.Names(provider.OpenAI)) + len(tab.Names(provider.Anthropic)); got < 1000 {
		t.Errorf("%d model names across protocols, want at least 1000", got)
	}
}

// BenchmarkLookup measures the request path's model lookup in a table of
// 1000 exact models and 20 patterns: an exact name (one map lookup, as
// before patterns), a name the last pattern matches (the map, then every
// pattern), and a name nothing matches.
func BenchmarkLookup(b *testing.B) {
	s := largeSnapshot(1000, 2)
	for i := range 20 {
		s.Models = append(s.Models, routesnap.Model{Name: fmt.Sprintf("family-%02d-*", i),
			Targets: []routesnap.Target{{Backend: "backend-00", Model: "*", Weight: 1}}})
	}
	tab, err := Compile(s.Backends, s.Models, benchCreds, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, model string }{
		{"exact", "public-model-00500"},
		{"pattern", "family-19-model"},
		{"unknown", "no-such-model-00500"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchModel, _ = tab.Model(bc.model)
			}
		})
	}
}

var benchModel *Model
