package gateway

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// echoRealtime is a provider that sends every frame back: a stand-in
// whose own cost is the same for the node and the bare relay.
func echoRealtime(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	ctx := context.WithoutCancel(r.Context())
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if c.Write(ctx, typ, data) != nil {
			return
		}
	}
}

// bareRelay is the least a WebSocket relay does, with the same library:
// accept, dial the provider, copy whole messages both ways. No key, no
// routing, no inspection, no accounting.
func bareRelay(provider string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithoutCancel(r.Context())
		up, _, err := websocket.Dial(ctx, provider, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.CloseNow()
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		up.SetReadLimit(-1)
		copyWS := func(dst, src *websocket.Conn) {
			for {
				typ, data, err := src.Read(ctx)
				if err != nil || dst.Write(ctx, typ, data) != nil {
					_ = dst.CloseNow()
					_ = src.CloseNow()
					return
				}
			}
		}
		go copyWS(up, c) // owned: ends when either connection closes
		copyWS(c, up)
	})
}

// BenchmarkRealtime measures a realtime session through the node beside
// a bare relay of the same library (docs/performance.md): per relayed
// audio frame (100 ms of 24 kHz PCM16 as input_audio_buffer.append, sent
// and echoed back: two relayed frames) its time, allocations and CPU,
// and per open idle session the heap and goroutines it holds; and the
// audio frame of a Gemini Live session (realtimeInput, binary frames). Both
// measure the client, relay and provider in one process: the difference
// between the two is the node's own cost.
func BenchmarkRealtime(b *testing.B) {
	echo := httptest.NewServer(http.HandlerFunc(echoRealtime))
	defer echo.Close()
	h := newHandlerAt(b, Options{}, echo.URL+"/v1")
	node := httptest.NewServer(h)
	defer node.Close()
	bare := httptest.NewServer(bareRelay(strings.Replace(echo.URL, "http", "ws", 1) + "/v1/realtime"))
	defer bare.Close()
	relays := []struct{ name, url string }{
		{"node", strings.Replace(node.URL, "http", "ws", 1) + "/v1/realtime?model=rt"},
		{"bare", strings.Replace(bare.URL, "http", "ws", 1) + "/"},
	}
	frame := []byte(`{"type":"input_audio_buffer.append","audio":"` + base64.StdEncoding.EncodeToString(make([]byte, 4800)) + `"}`)
	dial := func(b *testing.B, url string) *websocket.Conn {
		h := http.Header{}
		h.Set("Authorization", "Bearer client-key")
		c, _, err := websocket.Dial(b.Context(), url, &websocket.DialOptions{HTTPHeader: h, CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	for _, r := range relays {
		b.Run("audio_frame/"+r.name, func(b *testing.B) {
			c := dial(b, r.url)
			defer c.CloseNow()
			b.ReportAllocs()
			b.SetBytes(int64(2 * len(frame)))
			cpu := cpuTime(b)
			for b.Loop() {
				if err := c.Write(b.Context(), websocket.MessageText, frame); err != nil {
					b.Fatal(err)
				}
				if _, data, err := c.Read(b.Context()); err != nil || len(data) != len(frame) {
					b.Fatalf("echo: %d bytes, %v", len(data), err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
	// Gemini Live: the same audio as realtimeInput, after the setup
	// message that opens the session (docs/api.md "Gemini Live"); binary
	// frames, as Google's server sends them.
	liveFrame := []byte(`{"realtimeInput":{"audio":{"data":"` + base64.StdEncoding.EncodeToString(make([]byte, 4800)) + `","mimeType":"audio/pcm;rate=24000"}}}`)
	lives := []struct{ name, url string }{
		{"node", strings.Replace(node.URL, "http", "ws", 1) + "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"},
		{"bare", strings.Replace(bare.URL, "http", "ws", 1) + "/"},
	}
	for _, r := range lives {
		b.Run("live_audio_frame/"+r.name, func(b *testing.B) {
			c := dial(b, r.url)
			defer c.CloseNow()
			if err := c.Write(b.Context(), websocket.MessageText, []byte(`{"setup":{"model":"models/live"}}`)); err != nil {
				b.Fatal(err)
			}
			if _, _, err := c.Read(b.Context()); err != nil { // the setup, echoed
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(2 * len(liveFrame)))
			cpu := cpuTime(b)
			for b.Loop() {
				if err := c.Write(b.Context(), websocket.MessageBinary, liveFrame); err != nil {
					b.Fatal(err)
				}
				if _, data, err := c.Read(b.Context()); err != nil || len(data) != len(liveFrame) {
					b.Fatalf("echo: %d bytes, %v", len(data), err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
	for _, r := range relays {
		b.Run("idle_session/"+r.name, func(b *testing.B) {
			const n = 200
			var before, after runtime.MemStats
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&before)
				g := runtime.NumGoroutine()
				conns := make([]*websocket.Conn, n)
				for i := range conns {
					conns[i] = dial(b, r.url)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse)/n, "bytes/session")
				b.ReportMetric(float64(runtime.NumGoroutine()-g)/n, "goroutines/session")
				for _, c := range conns {
					_ = c.Close(websocket.StatusNormalClosure, "")
				}
			}
		})
	}
}
