package gateway

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

var budgetHeaderNames = []string{"Retry-After", "X-Should-Retry", headerBudgetRemaining, headerBudgetReset}

// TestBudgetChargedFromCost: each attempt's cost is charged to the key's
// budget when it ends; answers show what was left at admission; once the
// day's spend has reached the budget the next request is refused before
// anything is sent, with Retry-After to UTC midnight and x-should-retry
// false.
func TestBudgetChargedFromCost(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	l := limits.New(limits.Options{Clock: fc.Now})
	b := l.Bind()
	key := authsnap.Limits{USDPerDay: "0.00001"} // ten millionths of a dollar
	p := &authz.Principal{KeyID: "k_1", TenantID: "t_1", Limits: key}
	p.Limit = b.Subject(p.KeyID, p.TenantID, key, authsnap.Limits{})
	b.Done()
	rec := &events{}
	h, prov := newHandler(t, Options{Auth: limitedAuth{p}, Now: fc.Now, Recorders: []Recorder{rec}})
	// "gpt" at 1 USD per million input tokens and 2 per million output.
	var holder routes.Holder
	base := strings.TrimSuffix(provURL(t, h), "/chat/completions")
	holder.Store(pricedTable(t, base, &routesnap.Price{Input: "1", Output: "2"}, 5, upstream.NewRegistry(upstream.Options{})))
	h.o.Routes = &holder
	srv := httptest.NewServer(h)
	defer srv.Close()

	var got []answer
	for range 3 {
		got = append(got, serve(h, "POST", "/v1/chat/completions", chatBody, budgetHeaderNames))
	}
	// "hi" is 1 input token and the fake answers 3: 1 × 1 + 3 × 2 = 7
	// millionths of a dollar an answer.
	if evs := rec.all(); len(evs) != 2 || evs[0].Cost == nil || evs[0].Cost.USD != "0.000007" {
		t.Fatalf("events %d, first cost %+v; want 2 events of 0.000007 USD", len(evs), evs[0].Cost)
	}
	want := []answer{
		{Status: 200, Headers: map[string]string{"Retry-After": "", "X-Should-Retry": "", headerBudgetRemaining: "0.00001", headerBudgetReset: "3600"}},
		{Status: 200, Headers: map[string]string{"Retry-After": "", "X-Should-Retry": "", headerBudgetRemaining: "0.000003", headerBudgetReset: "3600"}},
		{Status: 429, Headers: map[string]string{"Retry-After": "3600", "X-Should-Retry": "false", headerBudgetRemaining: "0", headerBudgetReset: "3600"},
			Body: `{"error":{"code":"key_budget_exceeded","message":"this API key has spent its budget for the current window","param":null,"type":"rate_limit_exceeded"}}`},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("answers (-got +want):\n%s", diff)
	}
	if n := prov.RequestCount(); n != 2 {
		t.Errorf("the provider got %d requests, want 2", n)
	}
	// The next UTC day starts from zero.
	fc.Advance(time.Hour)
	if a := serve(h, "POST", "/v1/chat/completions", chatBody, budgetHeaderNames); a.Status != 200 || a.Headers[headerBudgetRemaining] != "0.00001" {
		t.Errorf("after midnight: %+v, want 200 with the whole budget", a)
	}
}

// TestBudgetRefusalShapes: a tenant's spent month refuses in each API's
// own error shape, with tenant_budget_exceeded and x-should-retry false.
func TestBudgetRefusalShapes(t *testing.T) {
	fc := clock.NewFake(time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC))
	l := limits.New(limits.Options{Clock: fc.Now})
	b := l.Bind()
	tenant := authsnap.Limits{USDPerMonth: "5"}
	p := &authz.Principal{KeyID: "k_1", TenantID: "t_1", TenantLimits: tenant}
	p.Limit = b.Subject(p.KeyID, p.TenantID, authsnap.Limits{}, tenant)
	b.Done()
	// Another key of the tenant spent the month's budget.
	tk, _, _ := p.Limit.Admit(fc.Now())
	tk.Charge(fc.Now(), 5*usd.Dollar)
	tk.Release()
	obs := &limitObserver{refused: map[string]int{}}
	h, prov := newHandler(t, Options{Auth: limitedAuth{p}, Now: fc.Now, Observer: obs})
	const toMarch = "43200" // 12 hours to March 1st, 00:00 UTC
	hdr := map[string]string{"Retry-After": toMarch, "X-Should-Retry": "false", headerBudgetRemaining: "0", headerBudgetReset: toMarch}
	openai := serve(h, "POST", "/v1/chat/completions", chatBody, budgetHeaderNames)
	anth := serve(h, "POST", "/v1/messages", messagesBody, budgetHeaderNames)
	gem := serve(h, "POST", "/v1beta/models/gemini:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, budgetHeaderNames)
	anth.Body = strings.ReplaceAll(anth.Body, anthropicRequestID(anth.Body), "RID")
	gem.Body = strings.ReplaceAll(gem.Body, gemRequestID(gem.Body), "RID")
	const msg = "this API key's tenant has spent its budget for the current window"
	want := []answer{
		{Status: 429, Headers: hdr, Body: `{"error":{"code":"tenant_budget_exceeded","message":"` + msg + `","param":null,"type":"rate_limit_exceeded"}}`},
		{Status: 429, Headers: hdr, Body: `{"error":{"message":"` + msg + `","type":"rate_limit_error"},"request_id":"RID","type":"error"}`},
		{Status: 429, Headers: hdr, Body: `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"scootgate","reason":"TENANT_BUDGET_EXCEEDED"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"43200s"},{"@type":"type.googleapis.com/google.rpc.RequestInfo","requestId":"RID"}],"message":"` + msg + `","status":"RESOURCE_EXHAUSTED"}}`},
	}
	if diff := cmp.Diff([]answer{openai, anth, gem}, want); diff != "" {
		t.Errorf("answers (-got +want):\n%s", diff)
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("the provider got %d requests, want 0", n)
	}
	if diff := cmp.Diff(obs.refused, map[string]int{"tenant/budget": 3}); diff != "" {
		t.Errorf("refusal metric (-got +want):\n%s", diff)
	}
}

// TestBudgetReserve: a key whose budget reserves is admitted only if its
// request's worst case fits (its body as input, its max_tokens as output,
// at the target's price, and the estimate of each further attempt); a
// request without an output cap is refused as bad; what the answer cost
// is settled when the request ends.
func TestBudgetReserve(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	l := limits.New(limits.Options{Clock: fc.Now})
	b := l.Bind()
	key := authsnap.Limits{USDPerDay: "0.0002", BudgetMode: authsnap.BudgetReserve} // 200 millionths
	p := &authz.Principal{KeyID: "k_1", TenantID: "t_1", Limits: key}
	p.Limit = b.Subject(p.KeyID, p.TenantID, key, authsnap.Limits{})
	b.Done()
	h, prov := newHandler(t, Options{Auth: limitedAuth{p}, Now: fc.Now, MaxAttempts: 2})
	// "gpt" at 1 USD per million input tokens and 2 per million output.
	var holder routes.Holder
	base := strings.TrimSuffix(provURL(t, h), "/chat/completions")
	holder.Store(pricedTable(t, base, &routesnap.Price{Input: "1", Output: "2"}, 5, upstream.NewRegistry(upstream.Options{})))
	h.o.Routes = &holder

	capped := func(n int) string {
		return `{"model":"gpt","max_tokens":` + strconv.Itoa(n) + `,"messages":[{"role":"user","content":"hi"}]}`
	}
	uncapped := serve(h, "POST", "/v1/chat/completions", chatBody, budgetHeaderNames)
	tooBig := serve(h, "POST", "/v1/chat/completions", capped(100), budgetHeaderNames)
	// 75 bytes + 2 × 20 tokens + the estimate of a second attempt, 19
	// tokens: 134 millionths held; the answer costs 7.
	fits := serve(h, "POST", "/v1/chat/completions", capped(20), budgetHeaderNames)
	after := serve(h, "POST", "/v1/chat/completions", capped(20), budgetHeaderNames)
	if len(capped(20)) != 75 {
		t.Fatalf("body of %d bytes; the sums below assume 75", len(capped(20)))
	}
	got := []answer{uncapped, tooBig, fits, after}
	want := []answer{
		{Status: 400, Headers: map[string]string{"Retry-After": "", "X-Should-Retry": "", headerBudgetRemaining: "", headerBudgetReset: ""},
			Body: `{"error":{"code":"output_cap_required","message":"` + errUnbounded().Msg + `","param":null,"type":"invalid_request_error"}}`},
		// 76 + 200 + 19 = 295 millionths do not fit in 200.
		{Status: 429, Headers: map[string]string{"Retry-After": "3600", "X-Should-Retry": "false", headerBudgetRemaining: "0.0002", headerBudgetReset: "3600"},
			Body: `{"error":{"code":"key_budget_exceeded","message":"this API key has spent its budget for the current window","param":null,"type":"rate_limit_exceeded"}}`},
		{Status: 200, Headers: map[string]string{"Retry-After": "", "X-Should-Retry": "", headerBudgetRemaining: "0.000066", headerBudgetReset: "3600"}},
		{Status: 200, Headers: map[string]string{"Retry-After": "", "X-Should-Retry": "", headerBudgetRemaining: "0.000059", headerBudgetReset: "3600"}},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("answers (-got +want):\n%s", diff)
	}
	if n := prov.RequestCount(); n != 2 {
		t.Errorf("the provider got %d requests, want 2", n)
	}
}
