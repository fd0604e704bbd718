package app

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func healthGet(t *testing.T, h http.Handler, path string) (int, ReadyReport) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var rep ReadyReport
	if path == "/readyz" {
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatalf("readyz body %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, rep
}

func TestReadiness(t *testing.T) {
	h := newHealth()
	authOK := errors.New("no authorization snapshot loaded")
	h.Add("authz", func() error { return authOK })
	h.Add("routes", func() error { return nil })

	code, rep := healthGet(t, h.Handler(nil), "/readyz")
	if code != 503 {
		t.Fatalf("status = %d, want 503", code)
	}
	if diff := cmp.Diff(rep, ReadyReport{Ready: false, Reasons: map[string]string{"authz": "no authorization snapshot loaded"}}); diff != "" {
		t.Fatalf("report (-got +want):\n%s", diff)
	}

	authOK = nil
	if code, rep = healthGet(t, h.Handler(nil), "/readyz"); code != 200 || !rep.Ready {
		t.Fatalf("status = %d ready = %v, want 200 true", code, rep.Ready)
	}

	h.StartDraining()
	code, rep = healthGet(t, h.Handler(nil), "/readyz")
	if code != 503 || rep.Reasons["drain"] == "" {
		t.Fatalf("draining: status = %d reasons = %v, want 503 with drain", code, rep.Reasons)
	}
	if code, _ := healthGet(t, h.Handler(nil), "/healthz"); code != 200 {
		t.Fatalf("healthz while draining = %d, want 200", code)
	}
}

func TestNoAPIRoutes(t *testing.T) {
	for _, p := range []string{"/v1/models", "/v1/chat/completions", "/"} {
		rec := httptest.NewRecorder()
		newHealth().Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != 404 {
			t.Errorf("GET %s on health listener = %d, want 404", p, rec.Code)
		}
	}
}

func TestDetailsShownWhenReady(t *testing.T) {
	h := newHealth()
	h.SetDetail("listen", "plaintext API by explicit opt-in")
	code, rep := healthGet(t, h.Handler(nil), "/readyz")
	if code != 200 || rep.Details["listen"] != "plaintext API by explicit opt-in" {
		t.Fatalf("status %d details %v, want 200 with the listen detail", code, rep.Details)
	}
}
