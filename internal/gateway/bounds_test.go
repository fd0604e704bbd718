package gateway

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestStreamBounds: a stream that only sends keepalives after its first
// event is ended at timeouts.stream_progress, and one that keeps sending
// content at timeouts.stream_total (docs/api.md "Timeouts"), each with the
// in-band error and a stage of its own. The provider moves the node's
// clock one second before each event: the bounds are read from that
// clock, never from a sleep.
func TestStreamBounds(t *testing.T) {
	const (
		chatFirst = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"
		chatDone  = "data: [DONE]\n\n"
		msgStart  = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
		msgDelta  = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"
		msgStop   = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	)
	tests := []struct {
		name      string
		path      string
		body      string
		first     string
		next      string // every later event, until the terminator
		done      string
		opts      Options
		wantStage string
		wantMsg   string
	}{
		{"openai comments", "/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[]}`, chatFirst, ": ping\n\n", chatDone,
			Options{StreamProgress: 30 * time.Second}, usageevent.StageNoProgress, "only keepalives"},
		{"anthropic pings", "/v1/messages", `{"model":"claude","stream":true,"max_tokens":5,"messages":[]}`, msgStart, "event: ping\ndata: {\"type\": \"ping\"}\n\n", msgStop,
			Options{StreamProgress: 30 * time.Second}, usageevent.StageNoProgress, "only keepalives"},
		{"content forever", "/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[]}`, chatFirst, chatFirst, chatDone,
			Options{StreamProgress: 30 * time.Second, StreamTotal: time.Minute}, usageevent.StageStreamTotal, "total limit"},
		{"content between pings", "/v1/messages", `{"model":"claude","stream":true,"max_tokens":5,"messages":[]}`, msgStart, "event: ping\ndata: {\"type\": \"ping\"}\n\n" + msgDelta, msgStop,
			Options{StreamProgress: 30 * time.Second}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			// Lockstep: the provider sends its next events when the client
			// has read the last ones, so the node has checked them first.
			read := make(chan struct{}, 1000) // never blocks the client
			prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				rc := http.NewResponseController(w)
				_, _ = io.WriteString(w, tt.first)
				_ = rc.Flush()
				for range 300 { // 5 minutes of the node's time
					for range strings.Count(tt.first, "\n\n") {
						select {
						case <-read:
						case <-r.Context().Done():
							return
						}
					}
					clk.Advance(time.Second)
					if _, err := io.WriteString(w, tt.next); err != nil || rc.Flush() != nil {
						return
					}
					tt.first = tt.next
				}
				_, _ = io.WriteString(w, tt.done)
			}))
			defer prov.Close()
			rec := &events{}
			o := tt.opts
			o.Now, o.Recorders = clk.Now, []Recorder{rec}
			o.StreamIdle = time.Hour // never the real clock's
			h := newHandlerAt(t, o, prov.URL+"/v1")
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				b.WriteString(line)
				if err != nil {
					break
				}
				if line == "\n" {
					read <- struct{}{}
				}
			}
			resp.Body.Close()
			data := b.String()
			got := string(data)
			if tt.wantStage == "" {
				if !strings.HasSuffix(got, tt.done) {
					t.Fatalf("a stream with progress was cut:\n%.300s", got[max(0, len(got)-300):])
				}
			} else if strings.Contains(got, tt.done) || !strings.Contains(got, tt.wantMsg) {
				t.Fatalf("stream not ended by the bound (want %q): %+v\n%.300s", tt.wantMsg, rec.all()[0], got[max(0, len(got)-300):])
			}
			evs := rec.all()
			if len(evs) != 1 {
				t.Fatalf("%d usage events, want 1", len(evs))
			}
			if diff := cmp.Diff(evs[0].FailureStage, tt.wantStage); diff != "" {
				t.Errorf("failure stage (-got +want):\n%s", diff)
			}
		})
	}
}
