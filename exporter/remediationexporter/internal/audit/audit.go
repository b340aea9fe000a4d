// Package audit records every decision of the remediation exporter (acted,
// dry run, skipped and why, failed) as a zap log line and, when a file is
// configured, as one JSON line appended to it and synced before the call
// returns, so the trail survives a crash of the collector. Replay reads the
// file back, so that a restarted exporter remembers what it did.
package audit // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Decisions.
const (
	DecisionActed   = "acted"   // the platform or the webhook did it
	DecisionDryRun  = "dry_run" // what would have been done
	DecisionSkipped = "skipped" // nothing done; Reason says why
	DecisionFailed  = "failed"  // tried and failed; Reason has the error
)

// Entry is one decision. Its JSON form is one line of the audit file.
type Entry struct {
	Time      time.Time `json:"time"`
	Decision  string    `json:"decision"`
	Reason    string    `json:"reason,omitempty"`
	Step      string    `json:"step"` // quarantine, release, webhook, record, breaker, acknowledge, repair
	FaultID   string    `json:"fault.id,omitempty"`
	FaultType string    `json:"fault.type,omitempty"`
	State     string    `json:"fault.state,omitempty"`
	Severity  string    `json:"fault.severity,omitempty"`
	Node      string    `json:"node,omitempty"`
	Platform  string    `json:"platform,omitempty"`
	Actions   []string  `json:"actions,omitempty"`
	Outcome   string    `json:"outcome,omitempty"` // the platform's actuator.Outcome
	Rule      string    `json:"rule,omitempty"`
	Attempts  int       `json:"attempts,omitempty"`
	// DecisionKey and Replica: the decision-log key of the decision the
	// entry belongs to, and the replica that made it (decision log on).
	DecisionKey string `json:"decision.key,omitempty"`
	Replica     string `json:"replica,omitempty"`
	// Event, on breaker entries: tripped or reset.
	Event string `json:"event,omitempty"`
	// Operator, OperatorRemote and OperatorReason: who asked for the change
	// through the fault console (the name the client declared), from
	// where, and why; empty for the exporter's own decisions.
	Operator       string `json:"operator,omitempty"`
	OperatorRemote string `json:"operator.remote,omitempty"`
	OperatorReason string `json:"operator.reason,omitempty"`
	// OperatorVia and OperatorForwardedFor: a control a standby's console
	// forwarded to this replica's: the standby's name, and the caller's
	// address as it saw it (OperatorRemote is then the standby's).
	OperatorVia          string `json:"operator.via,omitempty"`
	OperatorForwardedFor string `json:"operator.forwarded_for,omitempty"`
	// The repair loop's entries (step repair): the lifecycle step the node
	// entered (repair.Step), the repair action and attempt of the loop, the
	// ladder and checks it runs (on the entry that starts the loop), a
	// reference to resume it (the boot id before a reboot), and a
	// verification's results.
	LifecycleStep string               `json:"lifecycle.step,omitempty"`
	RepairAction  string               `json:"repair.action,omitempty"`
	RepairAttempt int                  `json:"repair.attempt,omitempty"`
	RepairLadder  []string             `json:"repair.ladder,omitempty"`
	RepairChecks  []repair.CheckSpec   `json:"repair.checks,omitempty"`
	RepairRef     string               `json:"repair.ref,omitempty"`
	Verification  []repair.CheckResult `json:"verification,omitempty"`
}

// Log writes entries. Safe for concurrent use.
type Log struct {
	logger *zap.Logger
	mu     sync.Mutex
	file   *os.File
}

// Open returns a Log that writes to logger and, when path is not empty,
// appends to path (created with mode 0600 when missing).
func Open(logger *zap.Logger, path string) (*Log, error) {
	l := &Log{logger: logger}
	if path == "" {
		return l, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := endLastLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: %w", err)
	}
	l.file = f
	return l, nil
}

// endLastLine ends a last line cut short by a crash with a newline, so
// that the next entry starts a line of its own and Replay skips only the
// cut one.
func endLastLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	_, err = f.Write([]byte{'\n'})
	return err
}

// Record logs e and appends it to the file. A failure to write the file is
// logged and returned; the decision itself stands.
func (l *Log) Record(e Entry) error {
	fields := []zap.Field{
		zap.String("decision", e.Decision), zap.String("step", e.Step),
		// Named as the fault record's attributes, so a log search by them
		// finds the decisions too.
		zap.String(fault.AttrID, e.FaultID), zap.String(fault.AttrType, e.FaultType),
		zap.String(fault.AttrState, e.State), zap.String(fault.AttrSeverity, e.Severity),
		zap.String("node", e.Node), zap.String("platform", e.Platform), zap.Strings("actions", e.Actions),
		zap.String("outcome", e.Outcome), zap.String("rule", e.Rule), zap.String("reason", e.Reason),
	}
	if e.Attempts > 0 {
		fields = append(fields, zap.Int("attempts", e.Attempts))
	}
	if e.DecisionKey != "" {
		fields = append(fields, zap.String("decision.key", e.DecisionKey), zap.String("replica", e.Replica))
	}
	if e.Event != "" {
		fields = append(fields, zap.String("event", e.Event))
	}
	if e.Operator != "" || e.OperatorRemote != "" {
		fields = append(fields, zap.String("operator", e.Operator), zap.String("operator.remote", e.OperatorRemote),
			zap.String("operator.reason", e.OperatorReason))
	}
	if e.LifecycleStep != "" {
		fields = append(fields, zap.String("lifecycle.step", e.LifecycleStep), zap.String("repair.action", e.RepairAction),
			zap.Int("repair.attempt", e.RepairAttempt))
	}
	if len(e.Verification) > 0 {
		fields = append(fields, zap.Any("verification", e.Verification))
	}
	if e.OperatorVia != "" {
		fields = append(fields, zap.String("operator.via", e.OperatorVia), zap.String("operator.forwarded_for", e.OperatorForwardedFor))
	}
	msg := "remediation " + e.Decision + ": " + e.Step
	if e.Decision == DecisionFailed {
		l.logger.Warn(msg, fields...)
	} else {
		l.logger.Info(msg, fields...)
	}
	if l.file == nil {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return errors.New("audit: file closed")
	}
	if _, err := l.file.Write(line); err != nil {
		l.logger.Error("audit file write failed", zap.Error(err))
		return err
	}
	if err := l.file.Sync(); err != nil {
		l.logger.Error("audit file sync failed", zap.Error(err))
		return err
	}
	return nil
}

// Close closes the file; later Records only log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	return err
}
