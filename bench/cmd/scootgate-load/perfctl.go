package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// perfAckWait bounds the wait for perf to acknowledge a command.
const perfAckWait = 10 * time.Second

// perfControl is perf's control channel (--control fd:3,4): perf reads
// commands ("enable", "disable") on one pipe and acknowledges each on the
// other. Both perf stat (the counts) and perf record (the host-stall
// trace) are driven through it.
type perfControl struct {
	ctl, ack *os.File   // our ends
	theirs   []*os.File // perf's ends, closed here once it has started
}

// newPerfControl makes the pipes and gives perf's ends to cmd as its
// descriptors 3 and 4. Call started once cmd.Start has returned.
func newPerfControl(cmd *exec.Cmd) (*perfControl, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{ctlR, ackW}
	return &perfControl{ctl: ctlW, ack: ackR, theirs: []*os.File{ctlR, ackW}}, nil
}

// started closes perf's ends in this process, whether or not perf
// started: an acknowledgement pipe whose writer stays open here would
// never report perf's exit.
func (p *perfControl) started() {
	for _, f := range p.theirs {
		f.Close()
	}
	p.theirs = nil
}

// command sends perf one command and waits for its acknowledgement.
func (p *perfControl) command(c string) error {
	if _, err := io.WriteString(p.ctl, c+"\n"); err != nil {
		return fmt.Errorf("perf %s: %w", c, err)
	}
	_ = p.ack.SetReadDeadline(time.Now().Add(perfAckWait))
	// perf writes "ack\n" and a NUL after it.
	var got []byte
	one := make([]byte, 1)
	for !strings.HasSuffix(string(got), "ack\n") {
		if _, err := p.ack.Read(one); err != nil {
			return fmt.Errorf("perf %s: no acknowledgement (%q): %w", c, got, err)
		}
		if one[0] != 0 {
			got = append(got, one[0])
		}
		if len(got) > 64 {
			return fmt.Errorf("perf %s: answered %q", c, got)
		}
	}
	return nil
}

// close closes every end still open.
func (p *perfControl) close() {
	p.started()
	p.ctl.Close()
	p.ack.Close()
}
