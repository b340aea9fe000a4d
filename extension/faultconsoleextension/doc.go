// Package faultconsoleextension is the fault console: an extension that
// keeps the faults remediation decided and the straggler heatmap of each job
// in a bounded store (console.Console), and serves them with the
// remediation controls (console.Controller) as a token-protected JSON API
// and an offline web page. See README.md.
package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"
