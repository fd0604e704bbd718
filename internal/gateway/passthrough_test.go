package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPassthroughRelaysAsItArrives: a speech answer reaches the client
// piece by piece, byte for byte with its Content-Type, while the provider
// is still sending: the provider writes its second half only after the
// client has read the first. A relay that held the answer whole would
// never let the client read the first half.
func TestPassthroughRelaysAsItArrives(t *testing.T) {
	first, second := []byte("ID3\x04\x00\xff\r\nhalf one|"), []byte("half two\x00")
	release := make(chan struct{})
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "audio/mpeg")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(first)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(second)
	}))
	defer prov.Close()
	h := newHandlerAt(t, Options{}, prov.URL+"/v1")
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a bound, not a synchronisation
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/audio/speech",
		strings.NewReader(`{"model":"gpt-all","input":"hi","voice":"alloy"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "audio/mpeg" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	got := make([]byte, len(first))
	if _, err := io.ReadFull(resp.Body, got); err != nil {
		t.Fatalf("the first half did not arrive before the provider sent the rest: %v", err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if all := append(got, rest...); !bytes.Equal(all, append(append([]byte{}, first...), second...)) {
		t.Errorf("client got %q", all)
	}
}
