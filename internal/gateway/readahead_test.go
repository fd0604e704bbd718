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
		r.watch = nil // never looked at: the relay keeps up whatever the machine's pace
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

// TestReadAheadLook calls the ticks' work by hand (the relay's lookout
// ticks an hour apart): the read-ahead starts only for a relay that is
// away from the answer and has not read from one look to the next (its
// first look after it joined only marks it); a relay that read meanwhile
// is looked at again, and one waiting for the provider leaves the lookout
// until its next read returns.
func TestReadAheadLook(t *testing.T) {
	answer := strings.Repeat("x", 10_000)
	newRelay := func(t *testing.T) *readAhead {
		t.Helper()
		r := newReadAhead(chunkedReader(answer), func() {}, func(error) {})
		r.watch = &lookout{every: time.Hour}
		t.Cleanup(r.close)
		return r
	}
	read := func(t *testing.T, r *readAhead) {
		t.Helper()
		if _, err := r.Read(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	state := func(r *readAhead) (started, armed bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.started, r.armed
	}

	t.Run("away since armed", func(t *testing.T) {
		r := newRelay(t)
		read(t, r)
		r.look() // the first tick since it joined: marked, not judged
		if started, armed := state(r); started || !armed {
			t.Fatalf("started %v, armed %v: want a relay that just joined only marked", started, armed)
		}
		r.look()
		if started, armed := state(r); !started || armed {
			t.Fatalf("started %v, armed %v: want the read-ahead started and the check unarmed", started, armed)
		}
		rest, err := io.ReadAll(r)
		if err != nil || len(rest) != len(answer)-100 {
			t.Fatalf("%d bytes after the first 100, err %v: want the rest of the answer", len(rest), err)
		}
	})

	t.Run("read since armed", func(t *testing.T) {
		r := newRelay(t)
		read(t, r)
		r.look() // marks it
		read(t, r)
		read(t, r)
		r.look()
		if started, armed := state(r); started || !armed {
			t.Fatalf("started %v, armed %v: want the relay looked at again, not behind", started, armed)
		}
		r.look() // no read since the last look: now it is behind
		if started, _ := state(r); !started {
			t.Fatal("want the read-ahead started after a look with no read since the previous one")
		}
	})

	t.Run("waiting for the provider", func(t *testing.T) {
		r := newRelay(t)
		read(t, r)
		r.mu.Lock()
		r.reading = true // as while the relay waits in src.Read
		r.mu.Unlock()
		r.look()
		if started, armed := state(r); started || armed {
			t.Fatalf("started %v, armed %v: want a relay in Read left alone, the check unarmed", started, armed)
		}
		r.mu.Lock()
		r.reading = false
		r.mu.Unlock()
		read(t, r)
		if _, armed := state(r); !armed {
			t.Fatal("want the check armed again when the relay's next read returns")
		}
	})
}

// TestLookoutRunsWhileItHoldsRelays: one lookout serves many relays; its
// goroutine starts with the first relay that joins and stops when the
// last one leaves, so an idle node keeps no ticker.
func TestLookoutRunsWhileItHoldsRelays(t *testing.T) {
	l := &lookout{every: time.Hour}
	running := func() (bool, int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.stop != nil, len(l.relays)
	}
	var relays []*readAhead
	for range 3 {
		r := newReadAhead(chunkedReader(strings.Repeat("x", 10_000)), func() {}, func(error) {})
		r.watch = l
		if _, err := r.Read(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		relays = append(relays, r)
	}
	if on, n := running(); !on || n != 3 {
		t.Fatalf("running %v with %d relays: want one goroutine for all 3", on, n)
	}
	relays[0].close()
	relays[1].close()
	if on, n := running(); !on || n != 1 {
		t.Fatalf("running %v with %d relays after two closed: want it running for the last", on, n)
	}
	relays[2].close()
	if on, n := running(); on || n != 0 {
		t.Fatalf("running %v with %d relays after all closed: want it stopped", on, n)
	}
}
