// Package electionextension implements the "election" extension: the seam
// through which the gpu_faults receiver's single-owner consumer group (the
// election of the one gateway replica that acts on faults) reaches the
// components that must act only on that replica, the remediation exporter
// and through it the fault console. The receiver offers its election at
// Start and withdraws it at Shutdown; the exporter follows it. Both find
// the extension through host.GetExtensions (ownership.FromHost), so a
// collector holds its own election and two collectors in one process never
// see each other's. A collector whose remediation exporter follows the
// election while no gpu_faults receiver offers one fails at start (Ready),
// and a gpu_faults receiver without the extension fails at its Start:
// neither a silent "every replica acts" nor a silent "nobody acts".
package electionextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/electionextension"
