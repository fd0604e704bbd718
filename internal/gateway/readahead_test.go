package gateway

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReadAheadOnlyWhenBehind: a relay that comes back for more at once
// reads the provider itself: no goroutine, no copy, and the slot goes
// back when it reads the end. One that stays away (a client that does
// not read) has the rest of the answer read ahead without it: ended is
// called while it is still away, and it then gets every byte in order.
func TestReadAheadOnlyWhenBehind(t *testing.T) {
	answer := strings.Repeat("0123456789", 10<<10) // 100 KiB
	cancel := func(error) {}

	t.Run("keeps up", func(t *testing.T) {
		ended := 0
		r := newReadAhead(chunkedReader(answer), func() { ended++ }, cancel)
		r.after = time.Hour // a loaded machine may keep this goroutine from running for a few milliseconds
		before := runtime.NumGoroutine()
		var got bytes.Buffer
		buf := make([]byte, 4<<10)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		started := r.started
		r.close()
		if started || ended != 1 || got.String() != answer || runtime.NumGoroutine() > before {
			t.Fatalf("started %v, ended %d times, %d of %d bytes relayed, goroutines %d → %d: want the relay to read the provider itself",
				started, ended, got.Len(), len(answer), before, runtime.NumGoroutine())
		}
	})

	t.Run("falls behind", func(t *testing.T) {
		ended := make(chan struct{})
		r := newReadAhead(chunkedReader(answer), func() { close(ended) }, cancel)
		defer r.close()
		first := make([]byte, 1000)
		n, err := r.Read(first)
		if err != nil {
			t.Fatal(err)
		}
		<-ended // the relay is away (its client does not read): read ahead without it
		rest, err := io.ReadAll(r)
		if err != nil || string(first[:n])+string(rest) != answer {
			t.Fatalf("%d + %d bytes relayed, err %v: want the whole answer in order", n, len(rest), err)
		}
	})
}

// chunkedReader returns a reader of s that returns at most 1000 bytes a
// read, as a provider's connection does.
func chunkedReader(s string) io.Reader {
	return &chunked{s: s}
}

type chunked struct{ s string }

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1000)], c.s)
	c.s = c.s[n:]
	return n, nil
}
