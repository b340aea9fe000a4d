package provenanceprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostname"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

// The bind_to_auth mode: the central of the small-cluster mode runs this
// processor on what the agents send, with the node of each request's
// credential (the nodeauth extension's, client.Info's Auth, attribute
// semconv.AuthAttrNode) in place of host_name. A resource that names that
// node (or no node) is the agent's own: its hardware signals and GPU
// claims come from that agent's receivers and pass, only a host.name
// inside it that differs is renamed. A resource that names another node is
// forged, treated exactly as the agent treats what a script sends: the
// credential's node stamped, the claim kept as forged.host.name, every
// hardware signal, gpu.uuid and gpu.index under forged. (the central has
// no GPU inventory: no GPU claim holds there), fault.* stripped.

var errNoNode = errors.New("provenanceprocessor: bind_to_auth: the request carries no authenticated node " +
	"(the receiver's authenticator must be a nodeauth extension)")

// validateBind: bind_to_auth takes the node from the request, so neither
// a configured node nor an inventory (of which node?) can go with it.
func (c *Config) validateBind() error {
	if !c.BindToAuth {
		return nil
	}
	var errs []error
	if c.HostName != "" {
		errs = append(errs, fmt.Errorf("host_name %q with bind_to_auth: the node is the request's credential's; unset host_name", c.HostName))
	}
	if c.NodeState != nil {
		errs = append(errs, fmt.Errorf("nodestate %q with bind_to_auth: the central holds no node's GPU inventory; unset nodestate", c.NodeState.String()))
	}
	return errors.Join(errs...)
}

// hostName is the node stamped on everything: host_name, else the
// machine's; none in the bind_to_auth mode, where it is per request.
func hostName(cfg *Config) (string, error) {
	if cfg.BindToAuth {
		return "", nil
	}
	host, err := hostname.Resolve(cfg.HostName)
	if err != nil {
		return "", fmt.Errorf("provenanceprocessor: host_name is empty and %w; set host_name", err)
	}
	return host, nil
}

// noCredential is the counter's option for requests refused for lack of
// an authenticated node.
var noCredential = metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, metadata.ReasonNoCredential)))

// startBound logs the mode once.
func (p *provenance) startBound() {
	p.logger.Info("provenanceprocessor: bind_to_auth: host.name is bound to each request's authenticated node; " +
		"a resource naming another node is renamed under forged. as at the agent")
}

// walker is a batch's walker: the configured node, or in the bind_to_auth
// mode the node of the request's credential; a request without one is
// refused (permanent: resending it cannot help), counted and logged once.
func (p *provenance) walker(ctx context.Context) (walker, error) {
	if !p.cfg.BindToAuth {
		return walker{host: p.host, inv: p.inv}, nil
	}
	if node := authNode(ctx); node != "" {
		return walker{host: node, bind: true}, nil
	}
	p.tb.RejectedClaims.Add(ctx, 1, noCredential)
	if !p.warnedNoCredential.Swap(true) {
		p.logger.Error(errNoNode.Error() + " (logged once, counted in otelcol_processor_provenance_rejected_claims{reason=\"" + metadata.ReasonNoCredential + "\"})")
	}
	return walker{}, consumererror.NewPermanent(errNoNode)
}

// authNode is the node the request's authenticator bound, or "".
func authNode(ctx context.Context) string {
	auth := client.FromContext(ctx).Auth
	if auth == nil {
		return ""
	}
	node, _ := auth.GetAttribute(semconv.AuthAttrNode).(string)
	return node
}

// ownResource handles a resource in the bind_to_auth mode when it can: a
// resource whose host.name entries all name the credential's node (or that
// has none, or only empty ones) is the node's own: host.name is stamped
// once and only host.name claims inside it are judged. A resource that
// names another node more than once is stamped here, the first differing
// claim kept. It returns false for one differing host.name, which the
// agent's path (resource) stamps and renames.
func (w *walker) ownResource(res pcommon.Resource) bool {
	attrs := res.Attributes()
	entries, found := 0, false
	claim := pcommon.NewValueEmpty()
	for k, v := range attrs.All() {
		if k != semconv.AttrHostName {
			continue
		}
		entries++
		if v.Type() == pcommon.ValueTypeStr && (v.Str() == w.host || v.Str() == "") {
			continue
		}
		if !found {
			// v points into the map's storage, which Remove moves.
			v.CopyTo(claim)
			found = true
		}
	}
	w.own = !found
	if !w.own && entries == 1 {
		return false
	}
	if entries != 1 || !w.own {
		for attrs.Remove(semconv.AttrHostName) {
		}
		if !w.own {
			w.reject(reasonHost, claim.AsString())
			claim.CopyTo(attrs.PutEmpty(forged + semconv.AttrHostName))
		}
	}
	attrs.PutStr(semconv.AttrHostName, w.host)
	w.attrs(attrs, true)
	return true
}
