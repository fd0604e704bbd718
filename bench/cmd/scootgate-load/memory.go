package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Where an idle stream's memory goes, read from inside the process under
// test: the runtime's memory classes (runtime/metrics), its goroutines by
// the function they started in, and the live heap by allocation site (the
// heap profile). The harness takes one snapshot before the idle streams
// open and one while they are held, and divides the difference by the
// streams open.

// idleProfileRate is runtime.MemProfileRate in the idle-stream processes
// (node and baseline alike): one sample per 64 KiB allocated on average
// instead of 512 KiB, so that a few thousand streams give a few thousand
// samples. The runtime keeps a small record off the heap per sampled live
// object, about one per stream at this rate.
const idleProfileRate = 64 << 10

// memSnapshot is GET /memory of a system under test.
type memSnapshot struct {
	// Classes are the runtime/metrics /memory/classes/... values in bytes,
	// keyed by the name without the prefix and unit ("heap/stacks"), read
	// before the collection that Sites needs.
	Classes map[string]uint64 `json:"classes"`
	// Goroutines counts live goroutines by the function each started in.
	Goroutines map[string]int `json:"goroutines"`
	// Sites is the live heap by allocation site after a collection,
	// scaled from the heap profile's samples (unbiased estimates).
	Sites map[string]siteBytes `json:"sites"`
	// ProfileRate is runtime.MemProfileRate (0: Sites is empty).
	ProfileRate int `json:"profile_rate"`
	// RSSAnon and RSSFile are the resident set's anonymous and
	// file-backed parts (/proc/self/status), read first.
	RSSAnon int64 `json:"rss_anon_bytes"`
	RSSFile int64 `json:"rss_file_bytes"`
	// Depth is the mean number of frames of the goroutines counted in
	// Goroutines, by the same key.
	Depth map[string]float64 `json:"depth"`
}

type siteBytes struct {
	Bytes   float64 `json:"bytes"`
	Objects float64 `json:"objects"`
}

const memClassPrefix = "/memory/classes/"

// readMemSnapshot is the child's side of GET /memory.
func readMemSnapshot() memSnapshot {
	s := memSnapshot{Classes: map[string]uint64{}, Goroutines: map[string]int{}, Sites: map[string]siteBytes{}, ProfileRate: runtime.MemProfileRate, Depth: map[string]float64{}}
	s.RSSAnon, s.RSSFile = rssParts()
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, memClassPrefix) && d.Kind == metrics.KindUint64 {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	for _, m := range samples {
		name, _, _ := strings.Cut(strings.TrimPrefix(m.Name, memClassPrefix), ":")
		s.Classes[name] = m.Value.Uint64()
	}

	// Goroutines by the function that created them and the one they
	// wait in, from the full text dump (runtime.GoroutineProfile would cut
	// stacks at 32 frames).
	var dump bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&dump, 2)
	frames := map[string]int{}
	for _, g := range parseGoroutines(dump.String()) {
		s.Goroutines[g.key]++
		frames[g.key] += g.frames
	}
	for k, n := range s.Goroutines {
		s.Depth[k] = float64(frames[k]) / float64(n)
	}

	// The heap profile reflects the last completed collection; two make
	// it current (the first may have been under way).
	runtime.GC()
	runtime.GC()
	var prof []runtime.MemProfileRecord
	for n, _ := runtime.MemProfile(nil, false); ; {
		prof = make([]runtime.MemProfileRecord, n+n/4+16)
		var ok bool
		if n, ok = runtime.MemProfile(prof, false); ok {
			prof = prof[:n]
			break
		}
	}
	rate := float64(runtime.MemProfileRate)
	for _, r := range prof {
		if r.InUseObjects() == 0 || rate <= 0 {
			continue
		}
		// Each sample stands for 1/(1-e^(-size/rate)) objects of its size
		// (the runtime samples by bytes allocated, exponentially).
		size := float64(r.AllocBytes) / float64(r.AllocObjects)
		scale := 1 / (1 - math.Exp(-size/rate))
		site := allocSite(stackFrames(r.Stack()))
		v := s.Sites[site]
		v.Bytes += float64(r.InUseBytes()) * scale
		v.Objects += float64(r.InUseObjects()) * scale
		s.Sites[site] = v
	}
	return s
}

// stackFrames names the functions of a stack outside the runtime,
// innermost first.
func stackFrames(pcs []uintptr) []string {
	var out []string
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if name := shortFunc(f.Function); name != "" {
			out = append(out, name)
		}
		if !more {
			return out
		}
	}
}

// shortFunc drops the module path from one of ours and returns "" for the
// runtime's own functions and the standard library's internal packages.
func shortFunc(name string) string {
	if name == "" || strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "internal/") {
		return ""
	}
	return strings.TrimPrefix(name, "github.com/scootgate/scootgate/")
}

// goroutine is one entry of a goroutine dump (pprof debug=2).
type goroutine struct {
	key    string // "created by F · waits in G"
	frames int
}

// parseGoroutines reads a goroutine dump: blocks of "goroutine N
// [state]:", then a function line and a file line per frame, then
// "created by F in goroutine M" and its file line.
func parseGoroutines(dump string) []goroutine {
	var out []goroutine
	for block := range strings.SplitSeq(dump, "\n\n") {
		var (
			creator, wait string
			frames        int
		)
		for line := range strings.Lines(block) {
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "goroutine "), strings.HasPrefix(line, "\t"), line == "":
			case strings.HasPrefix(line, "created by "):
				creator, _, _ = strings.Cut(strings.TrimPrefix(line, "created by "), " in goroutine")
				creator = shortFunc(creator)
			default:
				frames++
				fn := line
				if i := strings.LastIndexByte(fn, '('); i > 0 && strings.HasSuffix(fn, ")") {
					fn = fn[:i] // the arguments
				}
				if fn = shortFunc(fn); wait == "" && fn != "" {
					wait = fn
				}
			}
		}
		if frames == 0 {
			continue
		}
		out = append(out, goroutine{key: cmp.Or(creator, "main") + " · waits in " + cmp.Or(wait, "runtime"), frames: frames})
	}
	return out
}

// rssParts reads RssAnon and RssFile of /proc/self/status (0 without it).
func rssParts() (anon, file int64) {
	data, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "RssAnon":
			anon = n << 10
		case "RssFile":
			file = n << 10
		}
	}
	return anon, file
}

// allocSite names an allocation by its innermost three frames outside the
// runtime, innermost first: "bufio.NewReaderSize ← net/http.newBufioReader
// ← net/http.(*conn).serve".
func allocSite(frames []string) string {
	var out []string
	for _, f := range frames {
		if out = append(out, f); len(out) == 3 {
			break
		}
	}
	if len(out) == 0 {
		return "runtime"
	}
	return strings.Join(out, " ← ")
}

// releaseResult is POST /release: the anonymous resident set before and
// after debug.FreeOSMemory (a collection, then every free page returned).
type releaseResult struct {
	AnonBefore int64 `json:"anon_before_bytes"`
	AnonAfter  int64 `json:"anon_after_bytes"`
}

func releaseMemory() releaseResult {
	var r releaseResult
	r.AnonBefore, _ = rssParts()
	debug.FreeOSMemory()
	r.AnonAfter, _ = rssParts()
	return r
}

// memory reads the child's GET /memory.
func (c *child) memory(ctx context.Context) (memSnapshot, error) {
	var s memSnapshot
	return s, c.control(ctx, http.MethodGet, "/memory", &s)
}

// release asks the child to return its free memory to the system.
func (c *child) release(ctx context.Context) (releaseResult, error) {
	var r releaseResult
	return r, c.control(ctx, http.MethodPost, "/release", &r)
}

func (c *child) control(ctx context.Context, method, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.ready.Control+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.name, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d", c.name, path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// memBreakdown is what one idle stream holds in one system, per stream:
// the difference between the snapshot while the streams are held and the
// one before, divided by the streams open.
type memBreakdown struct {
	RSSKiB float64 `json:"rss_kib"` // the resident set (VmRSS) at its peak, for comparison
	// AnonKiB and FileKiB split the resident set between the snapshots:
	// anonymous memory (heap, stacks, runtime) and file pages (the
	// executable's code and data touched for the first time).
	AnonKiB float64 `json:"rss_anon_kib"`
	FileKiB float64 `json:"rss_file_kib"`
	// ReleasedKiB is what debug.FreeOSMemory took out of the resident set
	// after the second snapshot: free pages the runtime had kept, and what
	// the snapshot's collections freed (garbage, stacks they shrank).
	ReleasedKiB float64 `json:"released_kib"`
	// Depth is the mean frames per goroutine, by the Goroutines key.
	Depth map[string]float64 `json:"depth"`
	// ClassKiB: runtime memory classes ("heap/objects", "heap/stacks",
	// "metadata/mspan/inuse", ...), KiB per stream; only those that moved.
	ClassKiB map[string]float64 `json:"class_kib"`
	// Goroutines per stream by start function; only those that moved.
	Goroutines map[string]float64 `json:"goroutines"`
	// Sites: live heap per stream by allocation site, largest first, down
	// to 1/8 KiB; Rest sums the smaller ones.
	Sites   []siteShare `json:"sites"`
	RestKiB float64     `json:"rest_kib"`
}

type siteShare struct {
	Site    string  `json:"site"`
	KiB     float64 `json:"kib"`
	Objects float64 `json:"objects"`
}

// breakdown divides after − before by n streams.
func breakdown(before, after memSnapshot, rel releaseResult, rssKiB float64, n int) memBreakdown {
	b := memBreakdown{RSSKiB: rssKiB, ClassKiB: map[string]float64{}, Goroutines: map[string]float64{}, Depth: after.Depth}
	if n <= 0 {
		return b
	}
	per := 1 / float64(n)
	b.AnonKiB = float64(after.RSSAnon-before.RSSAnon) * per / 1024
	b.FileKiB = float64(after.RSSFile-before.RSSFile) * per / 1024
	b.ReleasedKiB = float64(rel.AnonBefore-rel.AnonAfter) * per / 1024
	for k, v := range after.Classes {
		if d := (float64(v) - float64(before.Classes[k])) * per / 1024; math.Abs(d) >= 0.05 {
			b.ClassKiB[k] = d
		}
	}
	for k, v := range after.Goroutines {
		if d := float64(v-before.Goroutines[k]) * per; math.Abs(d) >= 0.05 {
			b.Goroutines[k] = d
		}
	}
	for k, v := range after.Sites {
		w := before.Sites[k]
		s := siteShare{Site: k, KiB: (v.Bytes - w.Bytes) * per / 1024, Objects: (v.Objects - w.Objects) * per}
		if s.KiB >= 0.125 {
			b.Sites = append(b.Sites, s)
		} else {
			b.RestKiB += s.KiB
		}
	}
	for k, w := range before.Sites {
		if _, ok := after.Sites[k]; !ok {
			b.RestKiB -= w.Bytes * per / 1024
		}
	}
	slices.SortFunc(b.Sites, func(x, y siteShare) int { return cmp.Or(cmp.Compare(y.KiB, x.KiB), strings.Compare(x.Site, y.Site)) })
	return b
}

// stackPerGoroutineKiB is the average goroutine stack of the streams'
// goroutines.
func (b memBreakdown) stackPerGoroutineKiB() float64 {
	var g float64
	for _, v := range b.Goroutines {
		g += v
	}
	if g <= 0 {
		return 0
	}
	return b.ClassKiB["heap/stacks"] / g
}

// idleMarkdown renders the idle-stream section: one row per system and
// count, then per count the breakdown of both systems side by side.
func (r *report) idleMarkdown(p func(string, ...any)) {
	p("## Idle streams")
	p("")
	p("A fresh process per system and count; each stream sends one event, then stays silent while the client holds it open.")
	for _, i := range r.Idle {
		if i.Streams < i.Requested {
			p("%d streams were asked for; %d fit the descriptor limit of %d per process (a stream holds two sockets in the system under test and two in the proxy; the limit here cannot be raised).",
				i.Requested, i.Streams, i.FDLimit)
			break
		}
	}
	p("")
	p("| system | streams open | failed | open time | RSS before | RSS peak | per stream | extra goroutines | extra heap in use |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, i := range r.Idle {
		p("| %s | %d / %d | %d | %v | %s | %s | %.1f KiB | %d | %s |", targetNames[i.Target], i.Opened, i.Streams, i.Failed,
			i.OpenTime.Round(time.Millisecond), mib(i.RSSBefore), mib(i.RSSPeak), i.perStreamKiB(), i.Goroutines, mib(i.HeapInuse))
	}
	p("")
	var counts []int
	for _, i := range r.Idle {
		if !slices.Contains(counts, i.Requested) {
			counts = append(counts, i.Requested)
		}
	}
	for _, n := range counts {
		var base, node *idleResult
		for k, i := range r.Idle {
			if i.Requested != n {
				continue
			}
			switch i.Target {
			case keyBaseline:
				base = &r.Idle[k]
			case keyNode:
				node = &r.Idle[k]
			}
		}
		if base == nil || node == nil {
			continue
		}
		r.breakdownMarkdown(p, n, base.Breakdown, node.Breakdown)
	}
}

func (r *report) breakdownMarkdown(p func(string, ...any), n int, base, node memBreakdown) {
	kib := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	row := func(name string, b, nd float64, show func(float64) string) {
		p("| %s | %s | %s | %s |", name, show(b), show(nd), show(nd-b))
	}
	p("### Per idle stream, %d streams: where it goes", n)
	p("")
	p("From inside each process: runtime/metrics memory classes and goroutines (while the streams are held), and the live heap by allocation site (heap profile after a collection, sampled every %d KiB on average and scaled). KiB per stream unless said otherwise.", idleProfileRate>>10)
	p("")
	p("| | baseline | node | node − baseline |")
	p("|---|---:|---:|---:|")
	row("resident (VmRSS, peak)", base.RSSKiB, node.RSSKiB, kib)
	row("resident: anonymous", base.AnonKiB, node.AnonKiB, kib)
	row("resident: file pages (code, data)", base.FileKiB, node.FileKiB, kib)
	row("resident, returned at the end by FreeOSMemory (free pages kept, and what the snapshot's two collections freed)", base.ReleasedKiB, node.ReleasedKiB, kib)
	classes := map[string]bool{}
	for k := range base.ClassKiB {
		classes[k] = true
	}
	for k := range node.ClassKiB {
		classes[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(classes)) {
		if k == "total" {
			continue
		}
		row("runtime: "+k, base.ClassKiB[k], node.ClassKiB[k], kib)
	}
	row("runtime: total (mapped, touched or not)", base.ClassKiB["total"], node.ClassKiB["total"], kib)
	row("goroutines per stream (count)", sum(base.Goroutines), sum(node.Goroutines), func(v float64) string { return fmt.Sprintf("%.2f", v) })
	row("stack per goroutine", base.stackPerGoroutineKiB(), node.stackPerGoroutineKiB(), kib)
	p("")
	p("Goroutines per stream by the function that created them and the one they wait in, with their mean depth in frames:")
	p("")
	p("| created by · waits in | baseline | node | frames (baseline / node) |")
	p("|---|---:|---:|---:|")
	g := map[string]bool{}
	for k := range base.Goroutines {
		g[k] = true
	}
	for k := range node.Goroutines {
		g[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(g)) {
		p("| `%s` | %.2f | %.2f | %.0f / %.0f |", k, base.Goroutines[k], node.Goroutines[k], base.Depth[k], node.Depth[k])
	}
	p("")
	p("Live heap per stream by allocation site (innermost three frames outside the runtime):")
	p("")
	p("| allocation site | baseline KiB | node KiB | baseline objects | node objects |")
	p("|---|---:|---:|---:|---:|")
	type both struct{ b, n siteShare }
	sites := map[string]*both{}
	for _, s := range base.Sites {
		sites[s.Site] = &both{b: s}
	}
	for _, s := range node.Sites {
		if v := sites[s.Site]; v != nil {
			v.n = s
		} else {
			sites[s.Site] = &both{n: s}
		}
	}
	names := slices.SortedFunc(maps.Keys(sites), func(x, y string) int {
		a, b := sites[x], sites[y]
		return cmp.Or(cmp.Compare(max(b.b.KiB, b.n.KiB), max(a.b.KiB, a.n.KiB)), strings.Compare(x, y))
	})
	for _, k := range names {
		v := sites[k]
		p("| `%s` | %.2f | %.2f | %.2f | %.2f |", k, v.b.KiB, v.n.KiB, v.b.Objects, v.n.Objects)
	}
	p("| smaller sites | %.2f | %.2f | | |", base.RestKiB, node.RestKiB)
	p("")
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
