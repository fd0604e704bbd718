package main

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEverySUTRunsWithTheSameRuntime starts the command of every system
// under test (the baseline, the node and its variants, for the rounds and
// for the idle-stream test) as the harness builds it, with the test binary
// standing in as a probe that reports what the Go runtime gave it, and
// requires each to report the harness's one setting: the same CPUs,
// GOMAXPROCS, GOGC and GOMEMLIMIT for the node as for the baseline. The
// settings are not the runtime's defaults, so a command that merely
// inherited the harness's environment would fail.
func TestEverySUTRunsWithTheSameRuntime(t *testing.T) {
	sink, err := startOTLPSink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	pin := planPinning(true) // pinned where taskset and two CPUs allow, as the harness would be
	for _, tc := range []struct {
		name   string
		gogc   int
		memMiB int64
	}{
		{"gogc 150, 512 MiB", 150, 512},
		{"gogc off, no limit", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &bench{
				o:      options{nodeLog: true, profile: t.TempDir()},
				pin:    pin,
				sut:    newSUTRuntime(pin, tc.gogc, tc.memMiB),
				dir:    t.TempDir(),
				shm:    t.TempDir(), // a directory is all the command needs
				env:    []string{providerKeyEnv + "=k"},
				prov:   &child{ready: readyLine{Provider: "http://127.0.0.1:1", Broker: "127.0.0.1:2"}},
				egress: "socks5://127.0.0.1:3",
				sink:   sink,
			}
			want := b.sut
			wantLimit := int64(math.MaxInt64)
			if tc.memMiB > 0 {
				wantLimit = tc.memMiB << 20
			}
			if want.GOGC != tc.gogc || want.MemLimit != wantLimit || want.GOMAXPROCS < 1 || len(want.CPUs) == 0 {
				t.Fatalf("setting = %+v, want GOGC %d, GOMEMLIMIT %d and at least one CPU", want, tc.gogc, wantLimit)
			}
			var baselinePrefix []string
			for _, key := range append([]string{keyBaseline, keyNode}, variantOrder...) {
				for _, tag := range []string{"", "-idle"} {
					cmd, err := b.targetCommand(key, tag)
					if err != nil {
						t.Fatal(err)
					}
					// What starts the process: taskset and its CPU, or
					// nothing, before this executable.
					prefix := cmd.Args[:slices.IndexFunc(cmd.Args, func(a string) bool { return strings.HasPrefix(a, "-role=") })-1]
					if key == keyBaseline && tag == "" {
						baselinePrefix = prefix
					} else if !slices.Equal(prefix, baselinePrefix) {
						t.Errorf("%s%s starts with %q, the baseline with %q", key, tag, prefix, baselinePrefix)
					}
					cmd.Env = append(cmd.Env, runtimeProbeEnv+"=1")
					out, err := cmd.Output()
					if err != nil {
						t.Fatalf("%s%s: %v", key, tag, err)
					}
					var got sutRuntime
					if err := json.Unmarshal(out, &got); err != nil {
						t.Fatalf("%s%s: %v in %q", key, tag, err, out)
					}
					if diff := cmp.Diff(got, want); diff != "" {
						t.Errorf("%s%s runs with (-got +want):\n%s", key, tag, diff)
					}
					if err := want.check(&got); err != nil {
						t.Errorf("%s%s: %v", key, tag, err)
					}
				}
			}
		})
	}
}

// TestSUTRuntimeCheck: the harness refuses a system under test whose
// report differs from the setting in any field, or that reported none.
func TestSUTRuntimeCheck(t *testing.T) {
	want := sutRuntime{CPUs: []int{0}, GOMAXPROCS: 1, GOGC: 100, MemLimit: math.MaxInt64}
	for _, tc := range []struct {
		name    string
		got     *sutRuntime
		wantErr string // "" = accepted
	}{
		{"same", &sutRuntime{CPUs: []int{0}, GOMAXPROCS: 1, GOGC: 100, MemLimit: math.MaxInt64}, ""},
		{"none reported", nil, "reported no runtime settings"},
		{"other CPUs", &sutRuntime{CPUs: []int{0, 1}, GOMAXPROCS: 1, GOGC: 100, MemLimit: math.MaxInt64}, "CPUs [0 1], want [0]"},
		{"more Ps", &sutRuntime{CPUs: []int{0}, GOMAXPROCS: 2, GOGC: 100, MemLimit: math.MaxInt64}, "GOMAXPROCS 2, want 1"},
		{"collector off", &sutRuntime{CPUs: []int{0}, GOMAXPROCS: 1, GOGC: -1, MemLimit: math.MaxInt64}, "GOGC -1, want 100"},
		{"memory limit", &sutRuntime{CPUs: []int{0}, GOMAXPROCS: 1, GOGC: 100, MemLimit: 1 << 30}, "GOMEMLIMIT 1073741824"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := want.check(tc.got)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("check = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("check = %v, want an error naming %q", err, tc.wantErr)
			}
		})
	}
}

// TestSUTRuntimeEnv: the environment spells the setting as the Go
// runtime reads it, "off" for a collector or limit that is off.
func TestSUTRuntimeEnv(t *testing.T) {
	for _, tc := range []struct {
		r    sutRuntime
		want []string
	}{
		{sutRuntime{GOMAXPROCS: 1, GOGC: 100, MemLimit: math.MaxInt64}, []string{"GOMAXPROCS=1", "GOGC=100", "GOMEMLIMIT=off"}},
		{sutRuntime{GOMAXPROCS: 2, GOGC: -1, MemLimit: 512 << 20}, []string{"GOMAXPROCS=2", "GOGC=off", "GOMEMLIMIT=536870912"}},
	} {
		if diff := cmp.Diff(tc.r.env(), tc.want); diff != "" {
			t.Errorf("%+v env (-got +want):\n%s", tc.r, diff)
		}
	}
}
