package mqttpub

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/broker"
)

// TestReconnectAfterBrokerRestart stops a real (embedded) broker long
// enough for the backoff to reach its cap, starts it again on the same
// address, and measures how long delivery takes to resume. The jitter is
// pinned at the top of its range (the worst case), and the broker comes
// back just as a wait begins: with the default 2 s cap delivery resumes
// within about 2 s; with the former 30 s cap the wait after four failures
// was 8 s.
func TestReconnectAfterBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("waits through real backoffs (~6 s)")
	}
	var (
		mu  sync.Mutex
		got = map[string]int{}
	)
	onMessage := func(_ string, p []byte) {
		mu.Lock()
		got[string(p)]++
		mu.Unlock()
	}
	delivered := func(p string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return got[p] > 0
		}
	}
	b, err := broker.Start(broker.Options{Addr: "127.0.0.1:0", OnMessage: onMessage})
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addr()

	src := newFakeSource()
	o := testOptions(addr, "restart/usage")
	o.BackoffMin, o.BackoffMax = 0, 0 // the defaults under test
	o.Rand = func() float64 { return 0.999 }
	p := newPublisher(t, src, o)
	var (
		wmu   sync.Mutex
		waits []time.Duration
	)
	waitStarted := make(chan int, 64) // consecutive waits so far
	p.wait = func(ctx context.Context, d time.Duration) bool {
		wmu.Lock()
		waits = append(waits, d)
		n := len(waits)
		wmu.Unlock()
		waitStarted <- n
		return sleep(ctx, d)
	}
	start(t, p)
	src.add([]byte("before"))
	eventually(t, "the first event delivered", delivered("before"))

	if err := b.Close(); err != nil { // the publisher's connection ends with it
		t.Fatal(err)
	}
	src.add([]byte("during"))
	// The lost connection is wait 1; three failed connects follow. The
	// broker returns as wait 5 (the fourth consecutive failure) begins.
	for n := 0; n < 5; {
		n = recv(t, waitStarted)
	}
	back := time.Now()
	b2, err := broker.Start(broker.Options{Addr: addr, OnMessage: onMessage})
	if err != nil {
		t.Fatalf("restart the broker on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = b2.Close() })
	eventually(t, "the event appended while the broker was down delivered", delivered("during"))
	resumed := time.Since(back)
	t.Logf("delivery resumed %v after the broker was back", resumed.Round(time.Millisecond))

	wmu.Lock()
	defer wmu.Unlock()
	for i, d := range waits {
		if d > 2*time.Second {
			t.Errorf("wait %d was %v; the cap is 2s", i+1, d)
		}
	}
	if resumed > 3*time.Second {
		t.Errorf("delivery resumed %v after the broker was back; want about 2s at most", resumed)
	}
}
