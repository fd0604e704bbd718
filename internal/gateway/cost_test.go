package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

// pricedTable compiles one OpenAI model "gpt" at base with price p,
// stamped with version v, as the routes poller would.
func pricedTable(tb testing.TB, base string, p *routesnap.Price, v uint64, reg *upstream.Registry) *routes.Table {
	tb.Helper()
	bs := []routesnap.Backend{{ID: "oa", Protocol: "openai", BaseURL: base, Credential: "c", MaxInflightPerNode: 100}}
	ms := []routesnap.Model{{Name: "gpt", Targets: []routesnap.Target{{Backend: "oa", Model: "provider-gpt", Weight: 1, Stream: true, Price: p}}}}
	creds := map[string]credential.Credential{"c": {Secret: secret.New("provider-key"), Hosts: []string{"127.0.0.1"}}}
	tab, err := routes.Compile(bs, ms, creds, reg)
	if err != nil {
		tb.Fatal(err)
	}
	tab.SetVersion(v)
	return tab
}

// TestEventCost: an attempt's event carries its cost at the price of the
// table its request was routed with, even when a snapshot with another
// price is stored while the attempt runs (docs/usage-events.md "Cost");
// an attempt that may have reached the provider without usage is priced
// by its estimated input, and says so.
func TestEventCost(t *testing.T) {
	var holder routes.Holder
	reg := upstream.NewRegistry(upstream.Options{})
	var base string
	oldPrice := &routesnap.Price{Input: "1", Output: "2"}
	newPrice := &routesnap.Price{Input: "100", Output: "200"}
	prov := fakeprovider.New(fakeprovider.Options{Script: func(r fakeprovider.Request) *fakeprovider.Behaviour {
		if strings.Contains(string(r.Body), "swap") {
			// The request was routed; a new snapshot arrives before the
			// provider answers.
			holder.Store(pricedTable(t, base, newPrice, 8, reg))
		}
		return nil
	}})
	b, err := prov.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base = b
	t.Cleanup(func() { prov.Close() })

	tests := []struct {
		name, content string
		wantUSD       string
		wantVersion   uint64
		wantEstimated bool
	}{
		// 3 input × 1 + 3 output × 2 USD per million tokens.
		{name: "reported usage, price swapped mid-request", content: "one two swap", wantUSD: "0.000009", wantVersion: 7},
		// The next request is routed by the new table: 3 × 100 + 3 × 200.
		{name: "the next request pays the new price", content: "one two three", wantUSD: "0.0009", wantVersion: 8},
	}
	holder.Store(pricedTable(t, base, oldPrice, 7, reg))
	rec := &events{}
	h := newHandlerAt(t, Options{Recorders: []Recorder{rec}, NodeID: "node-1"}, base)
	h.o.Routes = &holder
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i, tt := range tests {
		resp, body := postChat(t, srv.URL, `{"model":"gpt","messages":[{"role":"user","content":"`+tt.content+`"}]}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tt.name, resp.StatusCode, body)
		}
		evs := rec.all()
		if len(evs) != i+1 {
			t.Fatalf("%s: %d events, want %d", tt.name, len(evs), i+1)
		}
		ev := evs[i]
		if err := ev.Validate(); err != nil {
			t.Fatalf("%s: event does not validate: %v", tt.name, err)
		}
		if ev.Usage == nil || ev.Usage.InputTokens != 3 || ev.Usage.OutputTokens != 3 {
			t.Fatalf("%s: usage %+v, want 3 in and 3 out", tt.name, ev.Usage)
		}
		if c := ev.Cost; c == nil || c.USD != tt.wantUSD || c.PriceVersion != tt.wantVersion || c.Estimated != tt.wantEstimated {
			t.Errorf("%s: cost %+v, want %s USD at version %d, estimated %v", tt.name, c, tt.wantUSD, tt.wantVersion, tt.wantEstimated)
		}
	}

	// A reset after the body: possibly sent, no usage. The estimate is a
	// quarter of the request's bytes as input, at the (new) input price.
	resp, _ := postChat(t, srv.URL, `{"model":"gpt","messages":[{"role":"user","content":"[[reset=after_body]]"}]}`)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("reset: status %d, want 502", resp.StatusCode)
	}
	evs := rec.all()
	ev := evs[len(evs)-1]
	if err := ev.Validate(); err != nil {
		t.Fatalf("event does not validate: %v", err)
	}
	want := usd.Mul(limits.EstimateTokens(ev.RequestBytes), 100_000_000).String()
	if c := ev.Cost; ev.SendState != "possibly_sent" || c == nil || c.USD != want || !c.Estimated || c.PriceVersion != 8 {
		t.Errorf("possibly sent: state %s, cost %+v; want an estimated %s USD at version 8", ev.SendState, c, want)
	}
}
