package k8s

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// Event reasons on the Node (`kubectl describe node`, `kubectl get events`).
const (
	EventReasonQuarantined = "OtelcolGpuQuarantined"
	EventReasonReleased    = "OtelcolGpuReleased"
	// EventReportingController names this exporter in events.k8s.io/v1.
	EventReportingController = "otelcol-gpu.io/remediation"
	// eventNamespace: events about cluster-scoped objects such as Nodes
	// live in "default", as the kubelet's do.
	eventNamespace = metav1.NamespaceDefault
	// maxEventNote is the API server's limit on an event's note.
	maxEventNote = 1024
)

// reportingInstance names this replica: the pod's hostname.
func reportingInstance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return Owner
	}
	if len(host) > 128 {
		host = host[:128]
	}
	return host
}

// recordEvent writes an events.k8s.io/v1 Event about node. An event is an
// explanation, not the action: failing to write one is logged, and the
// quarantine or release it explains stands.
func (p *Platform) recordEvent(ctx context.Context, node *corev1.Node, eventType, reason, action, note string) {
	if node == nil {
		return
	}
	if len(note) > maxEventNote {
		note = strings.ToValidUTF8(note[:maxEventNote], "")
	}
	now := p.now()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// The client-go recorder's naming: object name and a time suffix.
			Name:      fmt.Sprintf("%s.%x", node.Name, now.UnixNano()),
			Namespace: eventNamespace,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: EventReportingController,
		ReportingInstance:   p.instance,
		Action:              action,
		Reason:              reason,
		Type:                eventType,
		Note:                note,
		Regarding: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		},
	}
	if _, err := p.client.EventsV1().Events(eventNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		p.logger.Warn("could not record the node event", zap.String("node", node.Name), zap.String("reason", reason), zap.Error(err))
	}
}

// eventNote says which fault and what was done, for a human reading the node.
func eventNote(verb string, req actuator.Request, detail string) string {
	ids := req.FaultID
	if len(req.FaultIDs) > 0 {
		ids = strings.Join(req.FaultIDs, ",")
	}
	note := fmt.Sprintf("%s by %s: fault", verb, Owner)
	if req.FaultType != "" {
		note += " " + req.FaultType
	}
	if ids != "" {
		note += " " + ids
	}
	if req.GPUUUID != "" {
		note += " gpu " + req.GPUUUID
	}
	if detail != "" {
		note += ": " + detail
	}
	return note
}
