package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// revocable is an Authenticator whose one key can be revoked.
type revocable struct{ revoked atomic.Bool }

func (r *revocable) Authenticate(h http.Header, _ []string, _ time.Time) (*authz.Principal, error) {
	if r.revoked.Load() || h.Get("Authorization") != "Bearer client-key" {
		return nil, authz.ErrUnknownKey
	}
	return &authz.Principal{KeyID: "k", TenantID: "t"}, nil
}

// TestRealtimeKeyJudgedAtResponseCreate: the key is judged again before
// every response.create a session relays, also without a snapshot swap
// to trigger RecheckSessions: a revoked key's response.create gets the
// invalid_api_key error event, the session is closed with 1008, and the
// frame never reaches the provider.
func TestRealtimeKeyJudgedAtResponseCreate(t *testing.T) {
	auth := &revocable{}
	h, prov := newHandler(t, Options{Auth: auth})
	srv := httptest.NewServer(h)
	defer srv.Close()
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer client-key")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(srv.URL, "http", "ws", 1)+"/v1/realtime?model=rt", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	read := func() (string, string) {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var ev struct {
			Type  string `json:"type"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		return ev.Type, ev.Error.Code
	}
	if typ, _ := read(); typ != "session.created" {
		t.Fatalf("first event %s", typ)
	}
	auth.revoked.Store(true)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create"}`)); err != nil {
		t.Fatal(err)
	}
	if typ, code := read(); typ != "error" || code != "invalid_api_key" {
		t.Errorf("after the revocation: %s %s, want the invalid_api_key error event", typ, code)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("closed with %v, want 1008", err)
	}
	for _, r := range prov.Requests() {
		if strings.Contains(string(r.Body), "response.create") {
			t.Error("the revoked key's response.create reached the provider")
		}
	}
}

// TestRealtimeRefusedToReservingBudget: a realtime session has no worst
// case, so a key whose budget reserves (docs/limits.md "Reservations")
// is refused one with 400 before the upgrade, and nothing is sent.
func TestRealtimeRefusedToReservingBudget(t *testing.T) {
	l := limits.New(limits.Options{})
	b := l.Bind()
	key := authsnap.Limits{USDPerDay: "5", BudgetMode: authsnap.BudgetReserve}
	p := &authz.Principal{KeyID: "k_1", TenantID: "t_1", Limits: key}
	p.Limit = b.Subject(p.KeyID, p.TenantID, key, authsnap.Limits{})
	b.Done()
	h, prov := newHandler(t, Options{Auth: limitedAuth{p}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, strings.Replace(srv.URL, "http", "ws", 1)+"/v1/realtime?model=rt", nil)
	if err == nil {
		c.CloseNow()
		t.Fatal("the session was opened")
	}
	if resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("answer %v, want 400", resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code":"reservation_unsupported"`) {
		t.Errorf("body %s, want code reservation_unsupported", body)
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("the provider got %d requests, want 0", n)
	}
}

// TestLiveKeyJudgedAtClientContent: a Gemini Live session's key is judged
// again at every clientContent message (it asks for a turn), also without
// a snapshot swap: a revoked key's clientContent closes the session with
// 1007 and the reason, as Google closes one over an invalid key, and the
// message never reaches the provider.
func TestLiveKeyJudgedAtClientContent(t *testing.T) {
	auth := &revocable{}
	h, prov := newHandler(t, Options{Auth: auth})
	srv := httptest.NewServer(h)
	defer srv.Close()
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer client-key")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	url := strings.Replace(srv.URL, "http", "ws", 1) + "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"setup":{"model":"models/live"}}`)); err != nil {
		t.Fatal(err)
	}
	if typ, data, err := c.Read(ctx); err != nil || typ != websocket.MessageBinary || string(data) != `{"setupComplete":{}}` {
		t.Fatalf("after setup: %v %q %v; want setupComplete in a binary frame", typ, data, err)
	}
	auth.revoked.Store(true)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"clientContent":{"turns":[{"role":"user","parts":[{"text":"hi"}]}],"turnComplete":true}}`)); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 1007 || !strings.Contains(ce.Reason, "no longer valid") {
		t.Errorf("after the revocation: %v, want close 1007 saying the key is no longer valid", err)
	}
	for _, r := range prov.Requests() {
		if strings.Contains(string(r.Body), "clientContent") {
			t.Error("the revoked key's clientContent reached the provider")
		}
		if strings.Contains(string(r.Body), `"setup"`) && !strings.Contains(string(r.Body), `"models/provider-live"`) {
			t.Errorf("the setup reached the provider as %s", r.Body)
		}
	}
}
