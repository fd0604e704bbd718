package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParsePerfStat: perf stat -x, lines by event name; "<not counted>"
// (the threads never ran) is 0, comments and blank lines are skipped.
func TestParsePerfStat(t *testing.T) {
	in := `# started on Sun Dec  6 13:24:08 2026

1234,,raw_syscalls:sys_enter,2000000,100.00,,
56,,context-switches,2000000,100.00,,
<not counted>,,syscalls:sys_enter_futex,0,100.00,,
700,,syscalls:sys_enter_read,2000000,100.00,,
`
	got, err := parsePerfStat(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{perfSyscalls: 1234, perfSwitches: 56, "syscalls:sys_enter_futex": 0, "syscalls:sys_enter_read": 700}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	for _, bad := range []string{"1,,\n", "x,,raw_syscalls:sys_enter,1,100.00,,\n", "5,,context-switches,1,100.00,,\n"} {
		if _, err := parsePerfStat(strings.NewReader(bad)); err == nil {
			t.Errorf("parsePerfStat(%q): no error", bad)
		}
	}
}

// TestCallgrindTotal: the totals of the dump triggered with the hint,
// and an error for another dump's file or one without totals.
func TestCallgrindTotal(t *testing.T) {
	dump := "version: 1\ncreator: callgrind-3.19.0\npid: 42\ncmd:  ./x\npart: 3\n\ndesc: I1 cache: \ndesc: Trigger: dump load-1\n\npositions: line\nevents: Ir\nsummary: 987654\n\nfl=(1) a.go\nfn=(1) main\n3 12\n\ntotals: 987654\n"
	got, err := callgrindTotal(strings.NewReader(dump), "load-1")
	if err != nil || got != 987654 {
		t.Errorf("callgrindTotal = %d, %v; want 987654", got, err)
	}
	if _, err := callgrindTotal(strings.NewReader(dump), "idle-1"); err == nil {
		t.Error("another dump's hint: no error")
	}
	if _, err := callgrindTotal(strings.NewReader("desc: Trigger: dump load-1\n"), "load-1"); err == nil {
		t.Error("no totals: no error")
	}
}

// TestWrapCommand: the prefix goes right before this executable, after
// taskset, and the environment gains the extra entries.
func TestWrapCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/taskset", "-c", "0", exe, "-role=node", "-config", "x.toml")
	cmd.Env = []string{"A=1"}
	got := wrapCommand(cmd, []string{"valgrind", "--tool=callgrind"}, "B=2")
	want := []string{"/usr/bin/taskset", "-c", "0", "valgrind", "--tool=callgrind", exe, "-role=node", "-config", "x.toml"}
	if diff := cmp.Diff(got.Args, want); diff != "" {
		t.Errorf("args (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(got.Env, []string{"A=1", "B=2"}); diff != "" {
		t.Errorf("env (-got +want):\n%s", diff)
	}
	unpinned := wrapCommand(exec.Command(exe, "-role=baseline"), []string{"valgrind"})
	if diff := cmp.Diff(unpinned.Args, []string{"valgrind", exe, "-role=baseline"}); diff != "" {
		t.Errorf("unpinned args (-got +want):\n%s", diff)
	}
}

// TestParseCountFlags: defaults, lists, and the errors that name the flag.
func TestParseCountFlags(t *testing.T) {
	o, err := parseCountFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{o.egress, o.systems, o.rates, o.streamRates, o.repeats}, []any{[]string{"connect", "socks5"}, countSystems, []float64{500, 2000}, []float64{200}, 3}); diff != "" {
		t.Errorf("defaults (-got +want):\n%s", diff)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-egress", "tor"}, "-egress"},
		{[]string{"-systems", "node,node"}, "twice"},
		{[]string{"-path", "nope"}, "-path"},
		{[]string{"-instructions=false", "-kernel=false"}, "nothing to count"},
		{[]string{"-vg-requests", "0"}, "-vg-requests"},
		{[]string{"-vg-idle", "0"}, "-vg-rate"},
		{[]string{"-kinds", "websocket"}, "-kinds"},
	} {
		if _, err := parseCountFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseCountFlags(%q) = %v, want an error about %s", tc.args, err, tc.want)
		}
	}
}

// TestOfKinds: -kinds keeps the scenarios of the kinds it names, in order.
func TestOfKinds(t *testing.T) {
	scs := []countScenario{{name: "JSON @ 40/s"}, {name: "stream @ 10/s", stream: true}, {name: "JSON @ 500/s"}}
	for _, tc := range []struct {
		kinds string
		want  []string
	}{
		{"json,stream", []string{"JSON @ 40/s", "stream @ 10/s", "JSON @ 500/s"}},
		{"stream", []string{"stream @ 10/s"}},
		{"json", []string{"JSON @ 40/s", "JSON @ 500/s"}},
	} {
		o, err := parseCountFlags([]string{"-kinds", tc.kinds})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sc := range o.ofKinds(slices.Clone(scs)) {
			got = append(got, sc.name)
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("-kinds %s (-got +want):\n%s", tc.kinds, diff)
		}
	}
}

// TestRotate: each egress starts with the next system.
func TestRotate(t *testing.T) {
	s := []string{"a", "b", "c"}
	for i, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if diff := cmp.Diff(rotate(s, i), want); diff != "" {
			t.Errorf("rotate(%d) (-got +want):\n%s", i, diff)
		}
	}
}

// TestCountMarkdown: the ratio table divides each node row's median by
// the hop's in the same egress and scenario.
func TestCountMarkdown(t *testing.T) {
	r := &countReport{Instructions: []countRow{
		{Egress: "connect", Scenario: "JSON @ 40/s", System: keyBaseline, PerRequest: []float64{100, 102, 98}},
		{Egress: "connect", Scenario: "JSON @ 40/s", System: keyUsageOff, PerRequest: []float64{90, 91, 89}},
		{Egress: "connect", Scenario: "JSON @ 40/s", System: keyNode, PerRequest: []float64{110, 111, 109}},
	}}
	md := r.markdown(countOptions{vgRequests: 2000, vgStreams: 400, repeats: 3})
	if !strings.Contains(md, "| connect | JSON @ 40/s | 0.900× | 1.100× |") {
		t.Errorf("ratios missing:\n%s", md)
	}
	if !strings.Contains(md, "| connect | JSON @ 40/s | baseline | 100 | 98…102 | 4.00% |") {
		t.Errorf("hop row missing:\n%s", md)
	}
}
