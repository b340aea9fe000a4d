package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// maxReasonLen keeps the reason short enough for sinfo and slurmctld.
const maxReasonLen = 200

// Platform drains and resumes Slurm nodes. It is safe for concurrent use.
type Platform struct {
	logger    *zap.Logger
	transport transport
	prefix    string
	strip     string
	breaker   *Breaker
	closeFn   func()
	// drains are the drains this process wrote: Release resumes only those
	// (drains.go).
	drains drainMarks
}

var _ actuator.Platform = (*Platform)(nil)

// New builds the platform from a validated Config.
func New(cfg Config, logger *zap.Logger) (*Platform, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var (
		t       transport
		closeFn = func() {}
	)
	if cfg.Slurmrestd.URL != "" {
		rt, err := newRestTransport(cfg.Slurmrestd, cfg.Timeout)
		if err != nil {
			return nil, err
		}
		t, closeFn = rt, rt.close
	} else {
		t = &scontrolTransport{path: cfg.ScontrolPath, timeout: cfg.Timeout}
	}
	p := newPlatform(cfg, t, logger)
	p.closeFn = closeFn
	return p, nil
}

func newPlatform(cfg Config, t transport, logger *zap.Logger) *Platform {
	if logger == nil {
		logger = zap.NewNop()
	}
	prefix := strings.TrimSpace(cfg.ReasonPrefix)
	return &Platform{
		logger:    logger,
		transport: t,
		prefix:    prefix,
		strip:     cfg.StripDomainSuffix,
		breaker:   newBreaker(t, prefix, cfg.Breaker, cfg.StateFile, logger),
		closeFn:   func() {},
	}
}

// Name implements actuator.Platform.
func (*Platform) Name() string { return "slurm" }

// Breaker implements actuator.Platform. Quarantine does not consult it:
// the exporter calls Admit first.
func (p *Platform) Breaker() actuator.Breaker { return p.breaker }

// Close releases idle connections to slurmrestd.
func (p *Platform) Close() { p.closeFn() }

// NodeName maps host.name to the Slurm NodeName.
func (p *Platform) NodeName(host string) string {
	host = strings.TrimSpace(host)
	if p.strip != "" {
		host = strings.TrimSuffix(host, p.strip)
	}
	return host
}

// ours reports whether a reason carries this exporter's prefix.
func (p *Platform) ours(reason string) bool {
	return strings.HasPrefix(strings.TrimSpace(reason), p.prefix)
}

// wantsDrain reports whether the request asks for something Slurm does:
// drain (or cordon, its Kubernetes twin). No actions means drain.
func wantsDrain(actions []actuator.Action) bool {
	if len(actions) == 0 {
		return true
	}
	for _, a := range actions {
		if a == actuator.ActionDrain || a == actuator.ActionCordon {
			return true
		}
	}
	return false
}

// Quarantine drains req.Node with "<prefix> <fault.type> <fault.id>".
//
// Order of checks: unknown node; already drained by us (AlreadyDone);
// active MAINT reservation (SkipExcluded); drained, down or failed by
// someone else (SkipForeign); no gpu GRES (SkipNoGPU); else drain. Slurm
// has no compare-and-swap, so a drain by another writer between our read
// and our update would have its reason replaced: the window is one
// scontrol round trip.
func (p *Platform) Quarantine(ctx context.Context, req actuator.Request) (actuator.Result, error) {
	if !wantsDrain(req.Actions) {
		return actuator.Result{Outcome: actuator.SkipExcluded, Detail: fmt.Sprintf("no Slurm action in %v", req.Actions)}, nil
	}
	name, node, missing, err := p.lookupNode(ctx, req.Node)
	if err != nil {
		return actuator.Result{}, err
	}
	if missing != "" {
		return actuator.Result{Outcome: actuator.SkipNotFound, Detail: missing}, nil
	}
	if res, leave, err := p.leaveAlone(ctx, node); err != nil || leave {
		if err == nil && res.Outcome == actuator.AlreadyDone {
			p.adopt(name, node, req)
		}
		return res, err
	}
	reason := p.reason(req)
	if err := p.transport.drain(ctx, name, reason); err != nil {
		if errors.Is(err, errNodeNotFound) {
			return actuator.Result{Outcome: actuator.SkipNotFound, Detail: "no Slurm node " + name}, nil
		}
		return actuator.Result{}, err
	}
	p.drains.record(name, p.readBack(ctx, name, reason))
	p.logger.Debug("drained Slurm node", zap.String("node", name), zap.String("reason", reason))
	return actuator.Result{Outcome: actuator.Applied, Detail: fmt.Sprintf("%s State=DRAIN Reason=%q", name, reason)}, nil
}

// lookupNode reads the Slurm node of a request's node name. missing says
// why there is none (not a Slurm node name, no such node); err is a failure
// to ask.
func (p *Platform) lookupNode(ctx context.Context, reqNode string) (name string, node nodeInfo, missing string, err error) {
	name = p.NodeName(reqNode)
	if name == "" || strings.ContainsAny(name, " \t\n=\"") {
		return name, node, fmt.Sprintf("not a Slurm node name: %q", reqNode), nil
	}
	node, err = p.transport.node(ctx, name)
	if errors.Is(err, errNodeNotFound) {
		return name, node, "no Slurm node " + name, nil
	}
	return name, node, "", err
}

// Release resumes req.Node only when it is drained (or DOWN after our
// reboot, repair.go) with our prefix and,
// when fault ids are given (req.ReleaseIDs), for one of them: a drain of
// ours for another fault on the same node stays. The reason names only the
// fault that drained the node, so the exporter passes every fault it holds
// the node for; any one of them in the reason means the drain is theirs.
func (p *Platform) Release(ctx context.Context, req actuator.Request) (actuator.Result, error) {
	name, node, missing, err := p.lookupNode(ctx, req.Node)
	if err != nil {
		return actuator.Result{}, err
	}
	if missing != "" {
		return actuator.Result{Outcome: actuator.SkipNotFound, Detail: missing}, nil
	}
	if !node.unavailable() {
		p.drains.forget(name) // resumed by someone: a later drain is theirs
		return actuator.Result{Outcome: actuator.AlreadyDone, Detail: fmt.Sprintf("%s is not drained (%s)", name, strings.Join(node.States, "+"))}, nil
	}
	if !p.ours(node.Reason) {
		p.drains.forget(name)
		return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("%s drained by someone else: %q", name, node.Reason)}, nil
	}
	if rebootPending(node) {
		// Resuming now would put the node back in service and leave the
		// reboot to strike later: wait until it finished (repair.go).
		return actuator.Result{}, fmt.Errorf("slurm: %s is rebooting (%s): release waits for the reboot to finish", name, strings.Join(node.States, "+"))
	}
	if ids := req.ReleaseIDs(); len(ids) > 0 && !slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(node.Reason, id) }) {
		return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("%s drained by this exporter for another fault: %q", name, node.Reason)}, nil
	}
	// Our prefix is not enough: the drain must still be the one we wrote
	// (drains.go). A later drain, even with our words, stays.
	mark, held := p.drains.get(name)
	if !held {
		return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("%s: no drain of ours recorded by this exporter: %q stays for a human", name, node.Reason)}, nil
	}
	if !mark.still(node) {
		p.drains.forget(name)
		return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("%s drained again after ours (%s): now %q at %s, left alone",
			name, mark, node.Reason, node.ReasonTime.Format(time.DateTime))}, nil
	}
	if err := p.transport.resume(ctx, name); err != nil {
		return actuator.Result{}, err
	}
	p.drains.forget(name)
	return actuator.Result{Outcome: actuator.Applied, Detail: name + " State=RESUME"}, nil
}

// readBack reads the drain just written: the reason and slurmctld's time
// on it are the mark Release compares. Unreadable, the reason we sent
// stands alone.
func (p *Platform) readBack(ctx context.Context, name, reason string) drainMark {
	node, err := p.transport.node(ctx, name)
	if err != nil || !p.ours(node.Reason) {
		p.logger.Warn("drained Slurm node not read back: its release compares the reason only", zap.String("node", name), zap.Error(err))
		return drainMark{reason: reason}
	}
	return drainMark{reason: node.Reason, at: node.ReasonTime}
}

// adopt takes a drain of ours that this process did not write (another
// replica's before a failover) as its own when it names the fault acted
// on; a drain this process already holds keeps its mark, so a later drain
// by someone else with a copied reason is not adopted in its place.
func (p *Platform) adopt(name string, node nodeInfo, req actuator.Request) {
	if req.FaultID == "" || !strings.Contains(node.Reason, req.FaultID) {
		return
	}
	if _, held := p.drains.get(name); !held {
		// A reboot of ours (repair.go) goes on appending to the reason.
		reboot := strings.HasPrefix(node.Reason, p.prefix+" reboot ")
		p.drains.record(name, drainMark{reason: node.Reason, at: node.ReasonTime, reboot: reboot})
	}
}

// leaveAlone says whether node is not to be drained, and why: already
// drained by us (AlreadyDone), in maintenance, someone else's, or without
// a GPU. Quarantine and Check both ask it.
func (p *Platform) leaveAlone(ctx context.Context, node nodeInfo) (actuator.Result, bool, error) {
	if node.unavailable() && p.ours(node.Reason) {
		return actuator.Result{Outcome: actuator.AlreadyDone, Detail: fmt.Sprintf("%s already drained: %q", node.Name, node.Reason)}, true, nil
	}
	if resv, err := p.maintenanceReservation(ctx, node.Name); err != nil {
		return actuator.Result{}, true, err
	} else if resv != "" {
		return actuator.Result{Outcome: actuator.SkipExcluded, Detail: fmt.Sprintf("%s is in maintenance reservation %s", node.Name, resv)}, true, nil
	}
	if node.unavailable() {
		return actuator.Result{Outcome: actuator.SkipForeign, Detail: fmt.Sprintf("%s is %s by someone else: %q", node.Name, strings.Join(node.States, "+"), node.Reason)}, true, nil
	}
	if gresGPUs(node.Gres) == 0 {
		return actuator.Result{Outcome: actuator.SkipNoGPU, Detail: fmt.Sprintf("%s has no GPU: no gpu GRES (Gres=%s)", node.Name, node.Gres)}, true, nil
	}
	return actuator.Result{}, false, nil
}

// maintenanceReservation names the active MAINT reservation holding node.
func (p *Platform) maintenanceReservation(ctx context.Context, node string) (string, error) {
	resvs, err := p.transport.reservations(ctx)
	if err != nil {
		return "", err
	}
	for _, r := range resvs {
		if !r.Active || !r.maintenance() {
			continue
		}
		in, err := hostlistContains(r.Nodes, node)
		if err != nil {
			// Cannot tell: err on the side of leaving the node alone.
			p.logger.Warn("unparsable reservation node list", zap.String("reservation", r.Name), zap.Error(err))
			return r.Name, nil
		}
		if in {
			return r.Name, nil
		}
	}
	return "", nil
}

// reason builds "<prefix> <fault.type> <fault.id>[ <text>]" on one line.
// The exporter's req.Reason already reads "<fault.type>[.<xid>] <fault.id>":
// then it stands alone, so type and id are not written twice.
func (p *Platform) reason(req actuator.Request) string {
	parts := []string{p.prefix}
	fields := []string{req.FaultType, req.FaultID, req.Reason}
	if req.FaultID != "" && strings.Contains(req.Reason, req.FaultID) {
		fields = []string{req.Reason}
	}
	for _, s := range fields {
		if s = sanitize(s); s != "" {
			parts = append(parts, s)
		}
	}
	r := strings.Join(parts, " ")
	if len(r) > maxReasonLen {
		r = strings.ToValidUTF8(r[:maxReasonLen], "")
	}
	return r
}

// sanitize drops control characters and double quotes (scontrol's
// argument parser would cut the reason at them) and collapses spaces.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '"' || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
