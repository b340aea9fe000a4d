package xid // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/xid"

import (
	_ "embed"
	"strconv"
	"strings"
)

// ExporterUnknownMessage is dcgm-exporter's err_msg of a code beyond its
// table.
const ExporterUnknownMessage = "Unknown Error"

//go:embed exporter_messages.tsv
var exporterMessagesTSV string

// exporterMessages is exporter_messages.tsv by code (index = code).
var exporterMessages = parseExporterMessages(exporterMessagesTSV)

// parseExporterMessages reads the embedded table; a malformed line is a
// build defect, caught by TestExporterMessagesTable, so it panics.
func parseExporterMessages(tsv string) []string {
	var out []string
	for line := range strings.Lines(tsv) {
		line = strings.TrimRight(line, "\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		code, msg, ok := strings.Cut(line, "\t")
		n, err := strconv.Atoi(code)
		if !ok || err != nil || n != len(out) || msg == "" {
			panic("xid: exporter_messages.tsv: line " + strconv.Quote(line) + " is not the next code, a tab and a message")
		}
		out = append(out, msg)
	}
	return out
}

// ExporterMessage is the err_msg label dcgm-exporter gives an XID code on
// DCGM_FI_DEV_XID_ERRORS (0: "No Error").
func ExporterMessage(code int64) string {
	if code < 0 || code >= int64(len(exporterMessages)) {
		return ExporterUnknownMessage
	}
	return exporterMessages[code]
}
