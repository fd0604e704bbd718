package logline

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// TestReadableDurations: durations are written as Go writes them, in
// groups too; other values are left alone.
func TestReadableDurations(t *testing.T) {
	var buf bytes.Buffer
	slog.New(NewHandler(&buf, nil)).Info("drained", "took", 2301*time.Millisecond,
		slog.Group("g", "wait", 90*time.Second), "n", 3)
	for _, want := range []string{`"took":"2.301s"`, `"g":{"wait":"1m30s"}`, `"n":3`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("line %s lacks %s", buf.Bytes(), want)
		}
	}
}

// TestLevel: nil means Info; lines below the level are not written.
func TestLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(&buf, nil))
	log.Debug("hidden")
	log.Info("shown")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `"msg":"shown"`) {
		t.Fatalf("lines %q", got)
	}
}

// BenchmarkRequestLine is the node's request line (11 fields) written as
// the request path writes it, from an array: through LogAttrs, and
// through slog.Logger.LogAttrs as it was before.
func BenchmarkRequestLine(b *testing.B) {
	b.Run("LogAttrs", func(b *testing.B) { benchmarkRequestLine(b, true) })
	b.Run("slog", func(b *testing.B) { benchmarkRequestLine(b, false) })
}

func benchmarkRequestLine(b *testing.B, fast bool) {
	log := slog.New(NewHandler(discard{}, nil))
	b.ReportAllocs()
	for b.Loop() {
		var buf [14]slog.Attr
		attrs := append(buf[:0],
			slog.String("request_id", "sg-4f2a9c0d1e3b5a7c9e1f3a5b"),
			slog.String("path", "/v1/chat/completions"),
			slog.String("model", "gpt-4o-mini"),
			slog.Bool("stream", false),
			slog.String("backend", "openai-primary"),
			slog.Int("attempt", 1),
			slog.String("send_state", "response_received"),
			slog.Int("status", 200),
			slog.Float64("ttfb_ms", 412.387),
			slog.Float64("duration_ms", 1534.021),
			slog.String("placement", "balanced"),
		)
		if fast {
			LogAttrs(context.Background(), log, slog.LevelInfo, "request", attrs...)
		} else {
			log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestLevelText: levels, built-in or an attribute's value, read as slog
// writes them without the node's options, custom levels included.
func TestLevelText(t *testing.T) {
	handle := func(h slog.Handler, l slog.Level) {
		r := slog.NewRecord(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), l, "m", 0)
		r.AddAttrs(slog.Any("custom", l+1))
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2, slog.LevelError + 4} {
		var got, want bytes.Buffer
		handle(NewHandler(&got, slog.LevelDebug), l)
		handle(slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug}), l)
		if got.String() != want.String() {
			t.Errorf("level %v: %s, slog %s", l, got.Bytes(), want.Bytes())
		}
	}
}

// TestReorderingControlsEscaped: a string a client chose (a path, a model)
// cannot reorder the line it is written in: the bidirectional controls are
// written as \uXXXX text, the rest of the string as it was.
func TestReorderingControlsEscaped(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(NewHandler(&buf, nil))
	lg.Info("request", "path", "/v1/models/abc\u202egpj.exe", "model", "m\u2066x\u2069\u200f\u061c", "plain", "héllo")
	line := buf.String()
	for _, r := range "\u202e\u2066\u2069\u200f\u061c" {
		if strings.ContainsRune(line, r) {
			t.Errorf("line holds U+%04X raw: %q", r, line)
		}
	}
	for _, want := range []string{`"path":"/v1/models/abc\\u202egpj.exe"`, `"model":"m\\u2066x\\u2069\\u200f\\u061c"`, `"plain":"héllo"`} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %s", line, want)
		}
	}
}

// TestMayReorderLeadBytes: every reordering control starts with a byte
// mayReorder looks for, so the byte search never hides one.
func TestMayReorderLeadBytes(t *testing.T) {
	n := 0
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !reorders(r) {
			continue
		}
		n++
		if s := "ascii " + string(r) + " ascii"; !mayReorder(s) {
			t.Errorf("U+%04X (% x): mayReorder = false", r, string(r))
		}
	}
	if n != 12 {
		t.Errorf("%d reordering controls, want 12 (U+061C, U+200E–200F, U+202A–202E, U+2066–2069)", n)
	}
	if mayReorder("/v1/chat/completions héllo") {
		t.Error(`mayReorder("/v1/chat/completions héllo") = true, want false`)
	}
}

// sameBytes writes one line through LogAttrs's own encoder and the same
// line through slog (Handle with a record), both at the time at, and
// returns both. wrote is false when the encoder left the line to slog.
func sameBytes(t testing.TB, at time.Time, level slog.Level, msg string, attrs ...slog.Attr) (fast, slow string, wrote bool) {
	t.Helper()
	var fb, sb bytes.Buffer
	fh, sh := NewHandler(&fb, slog.LevelDebug), NewHandler(&sb, slog.LevelDebug)
	fh.now = func() time.Time { return at }
	wrote = fh.write(level, msg, attrs)
	r := slog.NewRecord(at, level, msg, 0)
	r.AddAttrs(attrs...)
	if err := sh.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return fb.String(), sb.String(), wrote
}

// TestLogAttrsSameBytes: LogAttrs's encoder writes, for every kind of
// value it takes, the bytes slog writes for the same line, and leaves
// the others (times, groups, any, empty keys, NaN, years past 9999) to
// slog.
func TestLogAttrsSameBytes(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 3, 120450000, time.UTC)
	cet := time.FixedZone("CET", 3600)
	tests := []struct {
		name  string
		at    time.Time
		level slog.Level
		msg   string
		attrs []slog.Attr
		slog  bool // left to slog
	}{
		{name: "request line", at: at, level: slog.LevelInfo, msg: "request", attrs: []slog.Attr{
			slog.String("request_id", "sg-4f2a9c0d1e3b5a7c9e1f3a5b"), slog.String("path", "/v1/chat/completions"),
			slog.String("model", "gpt-4o-mini"), slog.Bool("stream", false), slog.String("backend", "openai-primary"),
			slog.Int("attempt", 1), slog.String("send_state", "response_received"), slog.Int("status", 200),
			slog.Float64("ttfb_ms", 412.387), slog.Float64("duration_ms", 1534.021), slog.String("placement", "balanced"),
			slog.Uint64("suppressed", 17),
		}},
		{name: "warn, zone, whole second", at: time.Date(2026, 1, 2, 3, 4, 5, 0, cet), level: slog.LevelWarn, msg: "request", attrs: []slog.Attr{
			slog.String("error", "dial tcp: connection refused"), slog.Bool("stream", true), slog.Int("status", -1),
		}},
		{name: "escapes", at: at, level: slog.LevelError, msg: "a \"quoted\"\n\tline\u2028\u2029\x00\x1f<&>", attrs: []slog.Attr{
			slog.String("k\"ey\\\n", "\xff\xfe invalid \xe2\x82 utf-8 é 😀"),
			slog.String("html", "<script>&amp;</script>"),
			slog.String("del", "\x7f"),
		}},
		{name: "reordering controls", at: at, level: slog.LevelInfo, msg: "m\u202e", attrs: []slog.Attr{
			slog.String("path", "/v1/models/abc\u202egpj.exe"), slog.String("model", "m\u2066x\u2069\u200f\u061c\xff"),
			slog.String("key\u202e", "no escape for keys"), slog.String("lead bytes only", "\xe2\x80\x8b \xd8\xa7 \xe2"),
		}},
		{name: "floats", at: at, level: slog.LevelDebug, msg: "f", attrs: []slog.Attr{
			slog.Float64("zero", 0), slog.Float64("negzero", math.Copysign(0, -1)), slog.Float64("small", 1e-7),
			slog.Float64("tiny", 5e-324), slog.Float64("edge", 1e-6), slog.Float64("big", 1e21), slog.Float64("below", 999999999999999999999),
			slog.Float64("neg", -12.5e-9), slog.Float64("max", math.MaxFloat64), slog.Float64("third", 1.0/3),
		}},
		{name: "integers and durations", at: at, level: slog.LevelInfo + 2, msg: "n", attrs: []slog.Attr{
			slog.Int64("min", math.MinInt64), slog.Uint64("max", math.MaxUint64), slog.Duration("took", 2301*time.Millisecond),
			slog.Duration("zero", 0),
		}},
		{name: "no attributes", at: at, level: slog.LevelInfo, msg: ""},
		{name: "time value", at: at, level: slog.LevelInfo, msg: "m", attrs: []slog.Attr{slog.Time("t", at)}, slog: true},
		{name: "group", at: at, level: slog.LevelInfo, msg: "m", attrs: []slog.Attr{slog.Group("g", "wait", time.Second)}, slog: true},
		{name: "any", at: at, level: slog.LevelInfo, msg: "m", attrs: []slog.Attr{slog.Any("err", io.EOF)}, slog: true},
		{name: "empty key", at: at, level: slog.LevelInfo, msg: "m", attrs: []slog.Attr{slog.String("", "x")}, slog: true},
		{name: "NaN", at: at, level: slog.LevelInfo, msg: "m", attrs: []slog.Attr{slog.Float64("f", math.NaN())}, slog: true},
		{name: "year 10000", at: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), level: slog.LevelInfo, msg: "m", slog: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fast, slow, wrote := sameBytes(t, tt.at, tt.level, tt.msg, tt.attrs...)
			if wrote == tt.slog {
				t.Fatalf("written by the encoder: %t, want %t", wrote, !tt.slog)
			}
			if !wrote {
				if fast != "" {
					t.Fatalf("a line left to slog was written: %s", fast)
				}
				return
			}
			if fast != slow {
				t.Errorf("LogAttrs wrote\n%s\nslog writes\n%s", fast, slow)
			}
		})
	}
}

// FuzzLogAttrsSameBytes: for any strings, numbers and levels, LogAttrs's
// encoder writes what slog writes, or leaves the line to slog.
func FuzzLogAttrsSameBytes(f *testing.F) {
	f.Add("request", "path", "/v1/chat/completions", int64(200), uint64(3), 412.387, true, int64(0), int64(1764590403120450000))
	f.Add("m\u202e", "k\"\n", "\xff\u2028\x00é", int64(-1), uint64(1<<63), 1e-7, false, int64(4), int64(-62135596800000000))
	f.Fuzz(func(t *testing.T, msg, key, s string, i int64, u uint64, fl float64, bo bool, level, unixNano int64) {
		at := time.Unix(0, unixNano).In(time.FixedZone("", int(i%86400)))
		fast, slow, wrote := sameBytes(t, at, slog.Level(level), msg,
			slog.String(key, s), slog.Int64("i", i), slog.Uint64("u", u), slog.Float64("f", fl), slog.Bool("b", bo),
			slog.Duration("d", time.Duration(i)))
		if wrote && fast != slow {
			t.Errorf("LogAttrs wrote\n%s\nslog writes\n%s", fast, slow)
		}
	})
}

// TestLogAttrsWhicheverHandler: LogAttrs writes through any logger: one
// of the node's handler with attributes added, and another handler, get
// the line from slog; a level below the handler's writes nothing.
func TestLogAttrsWhicheverHandler(t *testing.T) {
	var own, with, other bytes.Buffer
	LogAttrs(context.Background(), slog.New(NewHandler(&own, nil)), slog.LevelInfo, "request", slog.Int("status", 200))
	LogAttrs(context.Background(), slog.New(NewHandler(&with, nil)).With("node", "n1"), slog.LevelInfo, "request", slog.Int("status", 200))
	LogAttrs(context.Background(), slog.New(slog.NewTextHandler(&other, nil)), slog.LevelInfo, "request", slog.Int("status", 200))
	LogAttrs(context.Background(), slog.New(NewHandler(&own, nil)), slog.LevelDebug, "hidden")
	if got := own.String(); !strings.HasSuffix(got, `,"level":"INFO","msg":"request","status":200}`+"\n") || strings.Count(got, "\n") != 1 {
		t.Errorf("own handler: %q", got)
	}
	if got := with.String(); !strings.HasSuffix(got, `"msg":"request","node":"n1","status":200}`+"\n") {
		t.Errorf("handler with attributes: %q", got)
	}
	if got := other.String(); !strings.Contains(got, "msg=request status=200") {
		t.Errorf("text handler: %q", got)
	}
}

// TestLogAttrsLinesWhole: lines written at once by LogAttrs and by slog,
// to a writer that is not safe for concurrent use, come out whole.
func TestLogAttrsLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(NewHandler(&buf, nil))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if g%2 == 0 {
					LogAttrs(context.Background(), lg, slog.LevelInfo, "fast", slog.Int("i", i))
				} else {
					lg.Info("slow", "i", i)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for l := range strings.Lines(buf.String()) {
		n++
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	if n != 800 {
		t.Errorf("%d lines, want 800", n)
	}
}

// TestSpecial8: the eight-byte test finds the first byte that is not
// plain ASCII (or none) as the byte-by-byte test does, for every byte at
// every position among plain bytes, and for pairs of bytes near the
// edges (where a borrow from one byte could hide or fake another); and
// plainPrefix agrees with the byte-by-byte prefix on strings of every
// length around the eight-byte steps.
func TestSpecial8(t *testing.T) {
	check := func(w []byte) {
		want := plainBytes(string(w), 0)
		got := 8
		if m := special8(binary.LittleEndian.Uint64(w)); m != 0 {
			got = bits.TrailingZeros64(m) / 8
		}
		if got != want {
			t.Fatalf("special8(% x): first special byte %d, want %d", w, got, want)
		}
	}
	for _, bg := range []byte{'a', ' ', '!', '#', '[', ']', '~', 0x7f} {
		w := bytes.Repeat([]byte{bg}, 8)
		check(w)
		for p := range 8 {
			for v := range 256 {
				w[p] = byte(v)
				check(w)
			}
			w[p] = bg
		}
	}
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"' - 1, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	w := bytes.Repeat([]byte{'a'}, 8)
	for p := range 7 {
		for _, v1 := range edges {
			for _, v2 := range edges {
				w[p], w[p+1] = v1, v2
				check(w)
			}
		}
		w[p], w[p+1] = 'a', 'a'
	}
	for n := range 26 {
		for at := range n {
			for _, c := range []string{"\"", "\\", "\x00", "\x1f", "\x7f", "é", "\xff", "\u202e"} {
				s := strings.Repeat("a", at) + c + strings.Repeat("a", n-at)
				if got, want := plainPrefix(s), plainBytes(s, 0); got != want {
					t.Fatalf("plainPrefix(%q) = %d, want %d", s, got, want)
				}
			}
		}
	}
}

// TestLogAttrsTimes: one handler's lines at times in the same second,
// the next ones, another zone and back carry the times slog writes for
// them (the formatted second is reused only within its second and zone).
func TestLogAttrsTimes(t *testing.T) {
	base := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	cet := time.FixedZone("CET", 3600)
	times := []time.Time{
		base, base.Add(1), base.Add(120 * time.Millisecond), base.Add(999999999),
		base.Add(time.Second), base.Add(time.Second).In(cet), base.Add(time.Second + 5000).In(cet),
		base.Add(time.Second + 5000), base.Add(-time.Hour * 24 * 365 * 30).In(time.FixedZone("", -(9*3600 + 30*60))),
		time.Unix(0, 0), time.Unix(-1, 999999999),
	}
	var got, want bytes.Buffer
	h, ref := NewHandler(&got, nil), NewHandler(&want, nil)
	var at time.Time
	h.now = func() time.Time { return at }
	for _, tm := range times {
		at = tm
		if !h.write(slog.LevelInfo, "m", nil) {
			t.Fatalf("%v: left to slog", tm)
		}
		if err := ref.Handle(context.Background(), slog.NewRecord(tm, slog.LevelInfo, "m", 0)); err != nil {
			t.Fatal(err)
		}
	}
	if got.String() != want.String() {
		t.Errorf("LogAttrs wrote\n%s\nslog writes\n%s", got.Bytes(), want.Bytes())
	}
}

// TestAppendMillis: a whole number of microseconds in milliseconds, the
// request line's durations, is written as encoding/json writes it.
func TestAppendMillis(t *testing.T) {
	check := func(us int64) {
		f := float64(us) / 1000
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Fatalf("%d µs: %s, want %s", us, got, want)
		}
	}
	for us := range int64(200000) {
		check(us)
	}
	for _, us := range []int64{999999999999999, 100000000000000, 123456789012345, 1e12, 1e12 + 1, 1e15 - 1, 1e15, 1e15 + 7} {
		check(us)
	}
	for i := range int64(100000) {
		check(i * 7919 * 104729 % 1e15)
	}
}
