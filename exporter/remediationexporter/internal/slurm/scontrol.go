package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// scontrolTransport runs the scontrol binary. Slurm 22.05's scontrol has
// no --json/--yaml, so it reads the one-line format (`scontrol -o show`),
// which every supported Slurm prints.
type scontrolTransport struct {
	path    string
	timeout time.Duration
	// env is added to the collector's environment (tests point SLURM_CONF
	// at their own cluster).
	env []string
}

func (s *scontrolTransport) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.path, args...)
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if isNotFound(msg) || isNotFound(stdout.String()) {
			return "", errNodeNotFound
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", fmt.Errorf("slurm: %s %s: %w", s.path, strings.Join(args, " "), ctxErr)
		}
		return "", fmt.Errorf("slurm: %s %s: %w: %s", s.path, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// isNotFound matches scontrol's "Node x not found" and slurmctld's
// "Invalid node name specified".
func isNotFound(msg string) bool {
	return strings.Contains(msg, "not found") || strings.Contains(msg, "Invalid node name")
}

func (s *scontrolTransport) node(ctx context.Context, name string) (nodeInfo, error) {
	out, err := s.run(ctx, "-o", "show", "node", name)
	if err != nil {
		return nodeInfo{}, err
	}
	for _, n := range parseNodeLines(out) {
		if n.Name == name {
			return n, nil
		}
	}
	return nodeInfo{}, errNodeNotFound
}

func (s *scontrolTransport) nodes(ctx context.Context) ([]nodeInfo, error) {
	out, err := s.run(ctx, "-o", "show", "node")
	if err != nil {
		return nil, err
	}
	return parseNodeLines(out), nil
}

func (s *scontrolTransport) reservations(ctx context.Context) ([]reservation, error) {
	out, err := s.run(ctx, "-o", "show", "reservation")
	if err != nil {
		return nil, err
	}
	return parseReservationLines(out), nil
}

func (s *scontrolTransport) drain(ctx context.Context, name, reason string) error {
	// No shell: the Reason argument is one argv element, spaces and all.
	_, err := s.run(ctx, "update", "NodeName="+name, "State=DRAIN", "Reason="+reason)
	return err
}

// reboot asks slurmctld to drain the node (ASAP), reboot it through its
// RebootProgram once no job is left, and leave it DOWN afterwards.
func (s *scontrolTransport) reboot(ctx context.Context, name, reason string) error {
	_, err := s.run(ctx, "reboot", "ASAP", "nextstate=DOWN", "reason="+reason, name)
	return err
}

func (s *scontrolTransport) resume(ctx context.Context, name string) error {
	_, err := s.run(ctx, "update", "NodeName="+name, "State=RESUME")
	return err
}

// keyPattern finds "Key=" at the start of a line or after whitespace.
var keyPattern = regexp.MustCompile(`(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=`)

// reasonPattern takes a node reason up to its "[user@time]" trailer; the
// reason is free text and may itself contain "key=value".
var reasonPattern = regexp.MustCompile(`(?:^|\s)Reason=(.*?) \[([^\]@]*)@([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})\]`)

// parseKeyValues splits one `scontrol -o` record into key/value pairs. A
// value runs to the next " Key=", so values with spaces (OS=...) survive.
func parseKeyValues(line string) map[string]string {
	kv := make(map[string]string)
	idx := keyPattern.FindAllStringSubmatchIndex(line, -1)
	for i, m := range idx {
		end := len(line)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		key := line[m[2]:m[3]]
		if _, seen := kv[key]; !seen {
			kv[key] = strings.TrimSpace(line[m[1]:end])
		}
	}
	return kv
}

// parseNodeLines parses `scontrol -o show node` output.
func parseNodeLines(out string) []nodeInfo {
	var nodes []nodeInfo
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "NodeName=") {
			continue
		}
		kv := parseKeyValues(line)
		n := nodeInfo{Name: kv["NodeName"], States: splitStates(kv["State"]), Gres: kv["Gres"], CPUAlloc: -1}
		if v, ok := kv["NextState"]; ok && v != "(null)" && v != "None" {
			n.NextState = strings.ToUpper(v)
		}
		if t, err := time.ParseInLocation("2006-01-02T15:04:05", kv["BootTime"], time.Local); err == nil {
			n.BootTime = t
		}
		if v, err := strconv.Atoi(kv["CPUAlloc"]); err == nil && v >= 0 {
			n.CPUAlloc = v
		}
		if m := reasonPattern.FindStringSubmatch(line); m != nil {
			n.Reason = strings.TrimSpace(m[1])
			// scontrol prints local time without a zone.
			if t, err := time.ParseInLocation("2006-01-02T15:04:05", m[3], time.Local); err == nil {
				n.ReasonTime = t
			}
		} else if r, ok := kv["Reason"]; ok && r != "(null)" {
			n.Reason = r
		}
		if n.Name != "" {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// parseReservationLines parses `scontrol -o show reservation` output
// ("No reservations in the system" parses to none).
func parseReservationLines(out string) []reservation {
	var res []reservation
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "ReservationName=") {
			continue
		}
		kv := parseKeyValues(line)
		r := reservation{
			Name:   kv["ReservationName"],
			Nodes:  kv["Nodes"],
			Active: strings.EqualFold(kv["State"], "ACTIVE"),
		}
		for _, f := range strings.Split(kv["Flags"], ",") {
			if f = strings.TrimSpace(f); f != "" {
				r.Flags = append(r.Flags, strings.ToUpper(f))
			}
		}
		res = append(res, r)
	}
	return res
}
