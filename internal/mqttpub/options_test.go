package mqttpub

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/secret"
)

func TestClientID(t *testing.T) {
	if got, want := ClientID("node-a"), "scootgate-node-a"; got != want {
		t.Errorf("ClientID = %q; want %q", got, want)
	}
}

func TestBackoff(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, time.Second
	tests := []struct {
		name string
		n    int
		r    float64
		want time.Duration
	}{
		{"first failure, top of range", 1, 0.999, 99900 * time.Microsecond},
		{"first failure, half", 1, 0.5, 50 * time.Millisecond},
		{"full jitter reaches zero", 1, 0, 0},
		{"second failure doubles", 2, 0.5, 100 * time.Millisecond},
		{"third", 3, 0.5, 200 * time.Millisecond},
		{"capped at hi", 5, 0.5, 500 * time.Millisecond},
		{"stays capped", 1000, 0.5, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(tt.n, lo, hi, tt.r); got != tt.want {
				t.Errorf("backoff(%d, %s, %s, %v) = %s; want %s", tt.n, lo, hi, tt.r, got, tt.want)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	p, err := New(newFakeSource(), Options{Broker: "tcp://127.0.0.1:1883", ClientID: ClientID("n")})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		Broker: "tcp://127.0.0.1:1883", ClientID: "scootgate-n", Topic: "scootgate/usage",
		Window: 1024, BatchMax: 1, MaxPayload: 256 << 10, KeepAlive: 30 * time.Second, ConnectTimeout: 10 * time.Second,
		AckTimeout: 30 * time.Second, BackoffMin: 500 * time.Millisecond, BackoffMax: 2 * time.Second,
	}
	got := p.o
	if got.Rand == nil || got.Clock == nil || got.Logger == nil {
		t.Errorf("Rand, Clock or Logger not defaulted: %+v", got)
	}
	if diff := cmp.Diff(got, want, cmpopts.IgnoreFields(Options{}, "Rand", "Clock", "Logger"), cmpopts.IgnoreUnexported(secret.Secret{})); diff != "" {
		t.Errorf("defaults (-got +want):\n%s", diff)
	}
}

func TestNewRejects(t *testing.T) {
	const canary = "pw-CANARY-1b2c"
	base := func() Options {
		return Options{Broker: "tcp://127.0.0.1:1883", ClientID: "scootgate-n"}
	}
	tests := []struct {
		name    string
		edit    func(o *Options)
		wantErr string
	}{
		{"no broker", func(o *Options) { o.Broker = "" }, "broker is required"},
		{"mqtt scheme", func(o *Options) { o.Broker = "mqtt://127.0.0.1:1883" }, "expected tcp://host:port or ssl://host:port"},
		{"no port", func(o *Options) { o.Broker = "tcp://127.0.0.1" }, "expected tcp://host:port"},
		{"path", func(o *Options) { o.Broker = "tcp://127.0.0.1:1883/x" }, "expected tcp://host:port"},
		{"credentials in URL", func(o *Options) { o.Broker = "tcp://u:" + canary + "@127.0.0.1:1883" }, "must not contain credentials"},
		{"no client id", func(o *Options) { o.ClientID = "" }, "client id"},
		{"wildcard topic", func(o *Options) { o.Topic = "usage/#" }, "topic"},
		{"password without username", func(o *Options) { o.Password = secret.New(canary) }, "needs a username"},
		{"username too long", func(o *Options) { o.Username = strings.Repeat("u", 65536) }, "username must be at most 65535 bytes"},
		{"username not UTF-8", func(o *Options) { o.Username = "\xff" }, "username must be at most 65535 bytes of UTF-8"},
		{"password too long", func(o *Options) { o.Username, o.Password = "u", secret.New(canary+strings.Repeat("p", 65536)) }, "password is longer than 65535 bytes"},
		{"window too large", func(o *Options) { o.Window = MaxWindow + 1 }, "window"},
		{"negative window", func(o *Options) { o.Window = -1 }, "window"},
		{"payload too large", func(o *Options) { o.MaxPayload = MaxMaxPayload + 1 }, "max payload"},
		{"sub-second keepalive", func(o *Options) { o.KeepAlive = 500 * time.Millisecond }, "keepalive"},
		{"keepalive beyond 16 bits of seconds", func(o *Options) { o.KeepAlive = 65536 * time.Second }, "above 18h12m15s"},
		{"backoff inverted", func(o *Options) { o.BackoffMin, o.BackoffMax = time.Second, time.Millisecond }, "backoff max"},
		{"TLS on tcp", func(o *Options) { o.TLS = &tls.Config{} }, "use ssl://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.edit(&o)
			_, err := New(newFakeSource(), o)
			if err == nil {
				t.Fatalf("New succeeded; want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New error %q; want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("New error contains the password: %q", err)
			}
		})
	}
	if _, err := New(nil, base()); err == nil {
		t.Error("New(nil source) succeeded")
	}
}

// TestNewTLS: ssl:// without a config gets system roots and the broker
// host as ServerName; a caller's config is cloned, not modified.
func TestNewTLS(t *testing.T) {
	mine := &tls.Config{MinVersion: tls.VersionTLS13}
	for _, tt := range []struct {
		name     string
		tls      *tls.Config
		wantMin  uint16
		wantName string
	}{
		{"default", nil, tls.VersionTLS12, "broker.example"},
		{"caller's", mine, tls.VersionTLS13, "broker.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Broker: "ssl://broker.example:8883", ClientID: "c", TLS: tt.tls}
			setDefaults(&o)
			lc, err := check(&o)
			if err != nil {
				t.Fatal(err)
			}
			if lc.tls == nil || lc.tls.MinVersion != tt.wantMin || lc.tls.ServerName != tt.wantName {
				t.Errorf("tls = %+v; want MinVersion %x, ServerName %q", lc.tls, tt.wantMin, tt.wantName)
			}
		})
	}
	if mine.ServerName != "" {
		t.Error("New modified the caller's tls.Config")
	}
}

// TestCommitBatch: one event a message keeps the outbox's 64-event
// commits; batched framing lets a commit hold batch_max times more, up
// to a quarter of the default crash window.
func TestCommitBatch(t *testing.T) {
	for _, tt := range []struct{ batchMax, want int }{
		{0, 64}, {1, 64}, {2, 128}, {10, 640}, {16, 1024}, {100, 1024}, {MaxBatchMax, 1024},
	} {
		if got := CommitBatch(tt.batchMax, outbox.DefaultMaxUnsynced); got != tt.want {
			t.Errorf("CommitBatch(%d) = %d, want %d", tt.batchMax, got, tt.want)
		}
	}
}
