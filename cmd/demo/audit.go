package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// auditEntry is one line of the remediation exporter's audit file
// (exporter/remediationexporter/internal/audit).
type auditEntry struct {
	Time      time.Time `json:"time"`
	Decision  string    `json:"decision"` // acted, dry_run, skipped, failed
	Reason    string    `json:"reason"`
	Step      string    `json:"step"` // quarantine, release, webhook, record
	FaultID   string    `json:"fault.id"`
	FaultType string    `json:"fault.type"`
	Severity  string    `json:"fault.severity"`
	Node      string    `json:"node"`
	Actions   []string  `json:"actions"`
	Rule      string    `json:"rule"`
	// The repair loop's entries (step "repair"): the step entered, the
	// repair and its attempt (internal/repair).
	LifecycleStep string `json:"lifecycle.step"`
	RepairAction  string `json:"repair.action"`
	RepairAttempt int    `json:"repair.attempt"`
}

// tailAudit follows the audit file (which the gateway creates on start and
// appends to) and hands each complete line to onEntry until ctx ends; a
// last read after ctx ends picks up what was written meanwhile.
func tailAudit(ctx context.Context, path string, onEntry func(auditEntry), onError func(error)) {
	var offset int64
	var partial []byte
	read := func() {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			onError(err)
			return
		}
		defer f.Close()
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			onError(err)
			return
		}
		data, err := io.ReadAll(f)
		if err != nil {
			onError(err)
			return
		}
		offset += int64(len(data))
		partial = append(partial, data...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				break
			}
			line := partial[:i]
			partial = partial[i+1:]
			var e auditEntry
			if err := json.Unmarshal(line, &e); err != nil {
				onError(fmt.Errorf("audit file: %w", err))
				continue
			}
			onEntry(e)
		}
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			read()
			return
		case <-tick.C:
			read()
		}
	}
}

// auditLine is the one line a decision gets on the terminal.
func auditLine(e auditEntry) string {
	what := e.Step
	switch e.Step {
	case "quarantine", "release":
		what += " [" + strings.Join(e.Actions, ",") + "]"
	case "webhook":
		what += " (would post the fault to the webhook)"
	case "repair":
		what += " → " + e.LifecycleStep
		if e.RepairAction != "" {
			what += fmt.Sprintf(" (%s attempt %d)", e.RepairAction, e.RepairAttempt)
		}
	}
	return fmt.Sprintf("REMEDIATION %s  %s  node=%s  fault=%s %s  rule=%s",
		strings.ReplaceAll(e.Decision, "_", "-"), what, orDashS(e.Node), e.FaultType, e.FaultID, orDashS(e.Rule))
}
