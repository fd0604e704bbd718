package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummarize(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{name: "empty", in: nil, want: Summary{}},
		{name: "one", in: ms(7), want: Summary{Count: 1, Mean: 7 * time.Millisecond, P50: 7 * time.Millisecond,
			P90: 7 * time.Millisecond, P99: 7 * time.Millisecond, P999: 7 * time.Millisecond, Max: 7 * time.Millisecond}},
		{name: "1 to 100", in: ms(hundred...), want: Summary{Count: 100, Mean: 50500 * time.Microsecond,
			P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond,
			P999: 100 * time.Millisecond, Max: 100 * time.Millisecond}},
		{name: "nearest rank rounds up", in: ms(1, 2, 3), want: Summary{Count: 3, Mean: 2 * time.Millisecond,
			P50: 2 * time.Millisecond, P90: 3 * time.Millisecond, P99: 3 * time.Millisecond,
			P999: 3 * time.Millisecond, Max: 3 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fmt.Sprint(tt.in)
			if diff := cmp.Diff(Summarize(tt.in), tt.want); diff != "" {
				t.Errorf("Summarize (-got +want):\n%s", diff)
			}
			if fmt.Sprint(tt.in) != before {
				t.Error("Summarize modified its input")
			}
		})
	}
}

func TestRunSchedule(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	a := Attack{Rate: 2000, Duration: 25 * time.Millisecond, MaxInFlight: 100, Timeout: 10 * time.Second}
	res, err := Run(context.Background(), a, NonStream(srv.Client(), Request{URL: srv.URL, Body: []byte(`{}`)}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(res.Shots), 50; got != want {
		t.Fatalf("%d shots, want %d", got, want)
	}
	if got := served.Load(); got != 50 {
		t.Errorf("server saw %d requests, want 50", got)
	}
	for i, s := range res.Shots {
		if s.Err != nil {
			t.Fatalf("shot %d: %v", i, s.Err)
		}
		// The schedule is exact: shot i is due i intervals after the first.
		if got, want := s.Intended.Sub(res.Start), time.Duration(i)*500*time.Microsecond; got != want {
			t.Errorf("shot %d intended at +%v, want +%v", i, got, want)
		}
		if s.Bytes != int64(len(`{"ok":true}`)) || s.Latency < s.Late {
			t.Errorf("shot %d: bytes %d, latency %v, late %v", i, s.Bytes, s.Latency, s.Late)
		}
	}
	if res.OK() != 50 || res.Elapsed <= 0 || res.Achieved() <= 0 {
		t.Errorf("OK %d, elapsed %v, achieved %v", res.OK(), res.Elapsed, res.Achieved())
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fired := false
	res, err := Run(ctx, Attack{Rate: 10, Duration: time.Hour, MaxInFlight: 1, Timeout: time.Second},
		func(context.Context, *Shot) { fired = true })
	if err != nil {
		t.Fatal(err)
	}
	if fired || len(res.Shots) != 0 {
		t.Fatalf("a cancelled attack fired %d shots", len(res.Shots))
	}
}

func TestRunRejectsBadAttack(t *testing.T) {
	for _, a := range []Attack{
		{Rate: 0, Duration: time.Second, MaxInFlight: 1, Timeout: time.Second},
		{Rate: 1, Duration: 0, MaxInFlight: 1, Timeout: time.Second},
		{Rate: 1, Duration: time.Second, MaxInFlight: 0, Timeout: time.Second},
		{Rate: 1, Duration: time.Second, MaxInFlight: 1, Timeout: 0},
	} {
		if _, err := Run(context.Background(), a, func(context.Context, *Shot) {}); err == nil {
			t.Errorf("Run(%+v) accepted", a)
		}
	}
}

// sseServer answers with the given events, flushing after each one.
func sseServer(t *testing.T, status int, events ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		for _, ev := range events {
			_, _ = io.WriteString(w, ev)
			_ = http.NewResponseController(w).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStream(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		events     []string
		wantEvents int
		wantErr    error
		wantStatus int
	}{
		{name: "three events", status: 200, events: []string{"data: a\n\n", ": keepalive\n\n", "data: [DONE]\n\n"}, wantEvents: 3},
		{name: "no event", status: 200, wantErr: ErrNoEvent},
		{name: "status", status: 429, events: []string{`{"error":"slow down"}`}, wantStatus: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sseServer(t, tt.status, tt.events...)
			s := Shot{Intended: time.Now()}
			Stream(srv.Client(), Request{URL: srv.URL}, Format{})(context.Background(), &s)
			var se *StatusError
			switch {
			case tt.wantStatus != 0:
				if !errors.As(s.Err, &se) || se.Code != tt.wantStatus || se.Body != tt.events[0] {
					t.Fatalf("err = %v, want status %d with its body", s.Err, tt.wantStatus)
				}
				return
			case !errors.Is(s.Err, tt.wantErr):
				t.Fatalf("err = %v, want %v", s.Err, tt.wantErr)
			}
			if s.Events != tt.wantEvents || len(s.Gaps) != max(tt.wantEvents-1, 0) {
				t.Errorf("%d events and %d gaps, want %d events", s.Events, len(s.Gaps), tt.wantEvents)
			}
			if tt.wantEvents > 0 && (s.TTFB <= 0 || s.TTFB > s.Latency) {
				t.Errorf("TTFB %v, latency %v", s.TTFB, s.Latency)
			}
		})
	}
}

func TestHoldStream(t *testing.T) {
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		_, _ = io.WriteString(w, "data: first\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // idle until the client goes away
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	opened := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		HoldStream(ctx, srv.Client(), Request{URL: srv.URL}, func(err error) { opened <- err })
	}()
	if err := <-opened; err != nil {
		t.Fatalf("opened with %v", err)
	}
	select {
	case <-done:
		t.Fatal("HoldStream returned while the stream was still open")
	default:
	}
	cancel()
	<-done
	<-ended // the server saw the client go away
}

func TestParseStatTicks(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    uint64
		wantErr bool
	}{
		{name: "plain", in: "123 (scootgate) S 1 123 123 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 5 1 2\n", want: 325},
		{name: "odd command name", in: "9 (a) b (c)) R 1 9 9 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 1 2", want: 10},
		{name: "truncated", in: "9 (x) R 1 2 3", wantErr: true},
		{name: "no name", in: "garbage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatTicks([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %d, %v; want %d (error %t)", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrProcFormat) {
				t.Errorf("error %v does not wrap ErrProcFormat", err)
			}
		})
	}
}

func TestParseVmRSS(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{name: "present", in: "Name:\tx\nVmPeak:\t 9 kB\nVmRSS:\t   2048 kB\nThreads: 3\n", want: 2 << 20},
		{name: "absent", in: "Name:\tkthreadd\n", wantErr: true},
		{name: "bad unit", in: "VmRSS: 12 MB\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVmRSS([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %d, %v; want %d (error %t)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseIO(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		r, w    uint64
		wantErr bool
	}{
		{name: "present", in: "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 3\nread_bytes: 0\n", r: 10, w: 3},
		{name: "one missing", in: "rchar: 1\nsyscr: 10\n", wantErr: true},
		{name: "not a number", in: "syscr: x\nsyscw: 1\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, w, err := parseIO([]byte(tt.in))
			if (err != nil) != tt.wantErr || r != tt.r || w != tt.w {
				t.Fatalf("got %d, %d, %v; want %d, %d (error %t)", r, w, err, tt.r, tt.w, tt.wantErr)
			}
		})
	}
}

// The counters of this process move when it makes a write(2).
func TestSyscallsOfSelf(t *testing.T) {
	_, w0, err := Syscalls(os.Getpid())
	if err != nil {
		t.Skipf("no /proc/self/io here: %v", err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 3 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	_, w1, err := Syscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if w1-w0 < 3 {
		t.Fatalf("syscw grew by %d over 3 writes", w1-w0)
	}
}

func TestParseCPUBusy(t *testing.T) {
	stat := "cpu  10 1 5 1000 9 2 3 4 0 0\ncpu0 6 0 2 500 4 1 1 2 0 0\ncpu1 4 1 3 500 5 1 2 2 0 0\nintr 1 2\n"
	tests := []struct {
		name    string
		want    uint64
		wantErr bool
	}{
		{name: "cpu", want: 10 + 1 + 5 + 2 + 3 + 4},
		{name: "cpu1", want: 4 + 1 + 3 + 1 + 2 + 2},
		{name: "cpu7", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCPUBusy([]byte(stat), tt.name)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %d, %v; want %d (error %t)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestProcSelf reads this process's own /proc files.
func TestProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := CPUTime(os.Getpid()); err != nil {
		t.Error(err)
	}
	if n, err := RSS(os.Getpid()); err != nil || n <= 0 {
		t.Errorf("RSS = %d, %v", n, err)
	}
	if _, err := CPUBusy(-1); err != nil {
		t.Error(err)
	}
}

func TestCollect(t *testing.T) {
	ms := time.Millisecond
	shots := []Shot{
		{Late: 1 * ms, Latency: 5 * ms, TTFB: 2 * ms, Gaps: []time.Duration{3 * ms}},
		{Late: 2 * ms, Latency: 9 * ms, Err: errors.New("failed")}, // errors count only as lateness
		{Err: ErrOverload}, // never sent: nothing
		{Late: 0, Latency: 4 * ms, TTFB: 1 * ms, Gaps: []time.Duration{1 * ms, 2 * ms}},
	}
	got := [][]time.Duration{Latencies(shots), ServiceLatencies(shots), TTFBs(shots), ServiceTTFBs(shots), Gaps(shots), Lateness(shots)}
	want := [][]time.Duration{{5 * ms, 4 * ms}, {4 * ms, 4 * ms}, {2 * ms, 1 * ms}, {1 * ms, 1 * ms}, {3 * ms, 1 * ms, 2 * ms}, {1 * ms, 2 * ms, 0}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("latencies, service, ttfb, service ttfb, gaps, lateness (-got +want):\n%s", diff)
	}
}
