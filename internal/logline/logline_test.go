package logline

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostile are strings that exercise every branch of the string encoding.
var hostile = []string{
	"", "plain", `quote " and backslash \`, "new\nline\r\ttab", "\x00\x01\x1f\x7f",
	"<html> & 'single'", "\u2028\u2029", "é ü 日本 🚀", "\xff\xfe broken \xc3", "\xe2\x80", // truncated U+2028
	"key\"=\"[redacted]", "}\n{\"level\":\"ERROR\"", strings.Repeat("a\\", 100),
}

// randomString mixes hostile pieces, random bytes and random runes.
func randomString(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(6); n > 0; n-- {
		switch r.IntN(4) {
		case 0:
			b.WriteString(hostile[r.IntN(len(hostile))])
		case 1:
			b.WriteByte(byte(r.IntN(256)))
		case 2:
			b.WriteRune(rune(r.IntN(0x11000)))
		default:
			b.WriteString("sg-0123456789abcdef")
		}
	}
	return b.String()
}

var floats = []float64{0, math.Copysign(0, -1), 1, -1, 0.001, 12.345, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 1e20, 1e21, 123456789012345678901234.0,
	math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1), 1.0 / 3}

func randomFloat(r *rand.Rand) float64 {
	switch r.IntN(4) {
	case 0:
		return floats[r.IntN(len(floats))]
	case 1:
		return math.Float64frombits(r.Uint64())
	case 2:
		return float64(r.Int64N(1e9)) / 1000 // a millisecond count, as logged
	default:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
	}
}

// field is one generated attribute, written both ways.
type field struct {
	kind int
	key  string
	s    string
	i    int64
	b    bool
	f    float64
}

func (f field) to(fs Fields) {
	switch f.kind {
	case 0:
		fs.String(f.key, f.s)
	case 1:
		fs.Int(f.key, f.i)
	case 2:
		fs.Bool(f.key, f.b)
	default:
		fs.Float(f.key, f.f)
	}
}

// TestSameBytesAsSlog: a Line writes exactly what slog's JSON handler
// writes for the same record, over generated records.
func TestSameBytesAsSlog(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	levels := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2}
	var fast, slow bytes.Buffer
	hf := NewHandler(&fast, slog.LevelDebug)
	hs := NewHandler(&slow, slog.LevelDebug)
	for n := range 20000 {
		fast.Reset()
		slow.Reset()
		tm := time.Unix(r.Int64N(253402300799), r.Int64N(1e9)).In(time.FixedZone("z", (r.IntN(48)-24)*1800))
		if n%3 == 0 {
			tm = tm.UTC()
		}
		level, msg := levels[r.IntN(len(levels))], "request"
		if n%5 == 0 {
			msg = randomString(r)
		}
		fields := make([]field, r.IntN(16))
		for i := range fields {
			fields[i] = field{kind: r.IntN(4), key: "k", s: randomString(r), i: r.Int64(), b: r.IntN(2) == 0, f: randomFloat(r)}
			if r.IntN(4) == 0 {
				fields[i].key = randomString(r)
			}
			if fields[i].key == "" {
				fields[i].key = "empty" // slog drops an attribute with an empty key and value
			}
		}
		l := hf.Line(context.Background(), tm, level, msg)
		var attrs Attrs
		for _, f := range fields {
			f.to(l)
			f.to(&attrs)
		}
		l.End()
		rec := slog.NewRecord(tm, level, msg, 0)
		rec.AddAttrs(attrs...)
		if err := hs.Handle(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast.Bytes(), slow.Bytes()) {
			t.Fatalf("record %d differs:\nLine: %s\nslog: %s", n, fast.Bytes(), slow.Bytes())
		}
	}
}

// TestReadableDurations: slog lines through the handler write durations
// as Go writes them.
func TestReadableDurations(t *testing.T) {
	var buf bytes.Buffer
	slog.New(NewHandler(&buf, nil)).Info("drained", "took", 2301*time.Millisecond)
	if !strings.Contains(buf.String(), `"took":"2.301s"`) {
		t.Fatalf("line %s", buf.Bytes())
	}
}

// TestLevel: Line is nil below the handler's level.
func TestLevel(t *testing.T) {
	var buf bytes.Buffer
	h := NewHandler(&buf, slog.LevelWarn)
	if l := h.Line(context.Background(), time.Now(), slog.LevelInfo, "request"); l != nil {
		t.Fatal("an Info line from a Warn handler")
	}
	h.Line(context.Background(), time.Now(), slog.LevelWarn, "request").End()
	if !strings.Contains(buf.String(), `"level":"WARN","msg":"request"}`) {
		t.Fatalf("line %q", buf.String())
	}
}

// TestWholeLines: Lines and slog's lines written at once from many
// goroutines reach the writer whole, one per Write (run with -race).
func TestWholeLines(t *testing.T) {
	w := &lineCheck{t: t}
	h := NewHandler(w, nil)
	log := slog.New(h)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if g%2 == 0 {
					l := h.Line(context.Background(), time.Now(), slog.LevelInfo, "request")
					l.Int("i", int64(i))
					l.String("s", strings.Repeat("x", i))
					l.End()
				} else {
					log.Info("other", "i", i)
				}
			}
		})
	}
	wg.Wait()
	if w.n != 8*200 {
		t.Fatalf("%d lines, want %d", w.n, 8*200)
	}
}

// lineCheck fails the test on a write that is not one whole line, and
// on two writes at once.
type lineCheck struct {
	t    *testing.T
	busy sync.Mutex
	n    int
}

func (c *lineCheck) Write(p []byte) (int, error) {
	if !c.busy.TryLock() {
		c.t.Error("two writes at once")
		return len(p), nil
	}
	defer c.busy.Unlock()
	if bytes.Count(p, []byte("\n")) != 1 || p[len(p)-1] != '\n' || p[0] != '{' {
		c.t.Errorf("not one line: %q", p)
	}
	c.n++
	return len(p), nil
}

// BenchmarkRequestLine is the node's request line (14 fields) written
// through slog.Logger.LogAttrs and as a Line, into one handler.
func BenchmarkRequestLine(b *testing.B) {
	h := NewHandler(discard{}, nil)
	log := slog.New(h)
	fields := func(f Fields) {
		f.String("request_id", "sg-4f2a9c0d1e3b5a7c9e1f3a5b")
		f.String("path", "/v1/chat/completions")
		f.String("model", "gpt-4o-mini")
		f.Bool("stream", false)
		f.String("backend", "openai-primary")
		f.Int("attempt", 1)
		f.String("send_state", "response_received")
		f.Int("status", 200)
		f.Float("ttfb_ms", 412.387)
		f.Float("duration_ms", 1534.021)
		f.String("placement", "balanced")
	}
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			attrs := make(Attrs, 0, 14)
			fields(&attrs)
			log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
		}
	})
	b.Run("line", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l := h.Line(context.Background(), time.Now(), slog.LevelInfo, "request")
			fields(l)
			l.End()
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestMillisAsJSON: the integer path for millisecond values writes what
// encoding/json writes, over every value up to 2000 ms in µs steps, the
// edges of the path, and random counts up to 10^12 µs.
func TestMillisAsJSON(t *testing.T) {
	check := func(f float64) {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Fatalf("appendFloat(%v) = %s, encoding/json %s", f, got, want)
		}
	}
	for k := range int64(2_000_001) {
		check(float64(k) / 1000)
	}
	for _, f := range []float64{0.001, 0.0009999, 0.0015, 999999999.999, 1e9, 1e9 - 0.0001, 123.4565, 0.1 + 0.2, 1.0005, math.Nextafter(0.001, 1), math.Nextafter(2.5, 0)} {
		check(f)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1_000_000 {
		check(float64(r.Int64N(1e12)) / 1000)
		check(r.Float64() * 1e9)
	}
}

// BenchmarkMillis writes the request line's two millisecond values with
// strconv's shortest formatting (what encoding/json does for them) and
// with appendFloat.
func BenchmarkMillis(b *testing.B) {
	vals := []float64{412.387, 1534.021}
	buf := make([]byte, 0, 64)
	b.Run("strconv", func(b *testing.B) {
		for b.Loop() {
			for _, f := range vals {
				buf = strconv.AppendFloat(buf[:0], f, 'f', -1, 64)
			}
		}
	})
	b.Run("appendFloat", func(b *testing.B) {
		for b.Loop() {
			for _, f := range vals {
				buf = appendFloat(buf[:0], f)
			}
		}
	})
}
