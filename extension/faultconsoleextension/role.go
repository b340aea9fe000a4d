package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// Only the replica that acts (the owner of gpu_faults) changes anything: a
// control on any other is answered 409 with its role and the owner, so
// that a person (the page's banner) or otelcol-gpu-ctl goes to the owner's
// console. The controller refuses too (it decides under its own lock);
// the console asks first so that a standby's view of a node, restored from
// the decision log, is not mistaken for one it could release.

// wireMember is m on the wire; nil for the zero member.
func wireMember(m ownership.Member) *consoleclient.Member {
	if m.Name == "" {
		return nil
	}
	return &consoleclient.Member{Name: m.Name, Console: m.Console}
}

// withRole fills the status's role from the controller's.
func withRole(st *consoleclient.Status, r console.Role) {
	st.Role, st.Election = string(r.Role), r.Election
	st.Self, st.Owner = wireMember(r.Self), wireMember(r.Owner)
}

// notOwner answers a control refused because this replica does not act:
// 409, its role and the owner, counted under reason not_owner and logged.
func (a *api) notOwner(w http.ResponseWriter, r *http.Request, e *console.NotOwnerError) {
	a.opts.Telemetry.FaultconsoleRefusedRequests.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrReason, "not_owner"),
	)))
	a.opts.Logger.Warn("faultconsole: control refused: this replica does not act", zap.String("method", r.Method),
		zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr), zap.String("owner", e.Role.Owner.String()))
	writeJSON(w, http.StatusConflict, consoleclient.Error{Error: e.Error(), Role: string(e.Role.Role), Owner: wireMember(e.Role.Owner)})
}

// ownerOnly is true on the replica that acts; elsewhere it answers the
// refusal and is false.
func (a *api) ownerOnly(w http.ResponseWriter, r *http.Request, c console.Controller) bool {
	role := c.Role()
	if role.Role == ownership.RoleOwner {
		return true
	}
	a.notOwner(w, r, &console.NotOwnerError{Role: role})
	return false
}

// controllerError answers a controller failure: 503 without a controller,
// 409 from a replica that does not act, 502 with the controller's message
// otherwise.
func (a *api) controllerError(w http.ResponseWriter, r *http.Request, what string, err error) {
	var notOwner *console.NotOwnerError
	switch {
	case errors.Is(err, console.ErrNoController):
		writeError(w, http.StatusServiceUnavailable, err.Error()+": "+what+" needs the remediation exporter in this collector's pipelines")
	case errors.As(err, &notOwner):
		a.notOwner(w, r, notOwner)
	default:
		writeError(w, http.StatusBadGateway, what+": "+err.Error())
	}
}
