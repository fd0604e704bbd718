package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// niceProbeEnv set makes the test binary, started by TestSetNice, set its
// nice value to the variable's, start a child and print every thread's
// nice value and the child's (niceProbe).
const niceProbeEnv = "SCOOTGATE_LOAD_NICE_PROBE"

type niceReport struct {
	Threads []int `json:"threads"`
	Child   int   `json:"child"`
}

// niceProbe is the test binary's side of TestSetNice.
func niceProbe(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return err
	}
	if err := setNice(n); err != nil {
		return err
	}
	var r niceReport
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			return err
		}
		nice, err := niceOf(fmt.Sprintf("/proc/self/task/%d/stat", tid))
		if err != nil {
			return err
		}
		r.Threads = append(r.Threads, nice)
	}
	out, err := exec.Command("sh", "-c", "cat /proc/$$/stat").Output()
	if err != nil {
		return err
	}
	if r.Child, err = parseNice(out); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

func niceOf(statPath string) (int, error) {
	data, err := os.ReadFile(statPath)
	if err != nil {
		return 0, err
	}
	return parseNice(data)
}

// parseNice reads the nice field (19) of a /proc stat line.
func parseNice(stat []byte) (int, error) {
	i := bytes.LastIndexByte(stat, ')')
	f := bytes.Fields(stat[i+1:])
	const nice = 19 - 3
	if i < 0 || len(f) <= nice {
		return 0, fmt.Errorf("stat %q", stat)
	}
	return strconv.Atoi(string(f[nice]))
}

// TestSetNice runs setNice in a child (a nice value raised cannot be
// lowered again without root) and requires every thread of it, and a
// process it starts, to have the value.
func TestSetNice(t *testing.T) {
	self, err := niceOf("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	want := min(self+3, 19)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), niceProbeEnv+"="+strconv.Itoa(want))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	var got niceReport
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("probe said %q: %v", out, err)
	}
	if len(got.Threads) < 2 {
		t.Fatalf("probe had %d threads; a Go process has more", len(got.Threads))
	}
	wantReport := niceReport{Child: want}
	for range got.Threads {
		wantReport.Threads = append(wantReport.Threads, want)
	}
	if diff := cmp.Diff(got, wantReport); diff != "" {
		t.Errorf("nice values (-got +want):\n%s", diff)
	}
}
