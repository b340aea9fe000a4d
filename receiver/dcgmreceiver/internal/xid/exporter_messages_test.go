package xid

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExporterMessagesTable(t *testing.T) {
	require.Len(t, exporterMessages, 173, "codes 0 to 172, as dcgm-exporter's table")
	for code, want := range map[int64]string{
		0: "No Error", 13: "Graphics Engine Exception", 48: "Double Bit ECC Error", 79: "GPU has fallen off the bus",
		94: "Contained ECC error", 95: "Uncontained ECC error", 119: "GSP RPC Timeout", 172: "Uncorrectable SRAM Error",
		173: ExporterUnknownMessage, -1: ExporterUnknownMessage, 1 << 40: ExporterUnknownMessage,
	} {
		assert.Equal(t, want, ExporterMessage(code), "code %d", code)
	}
}

func TestExporterMessagesRefusesAMalformedTable(t *testing.T) {
	for name, tsv := range map[string]string{
		"a gap":      "0\tNo Error\n2\tx\n",
		"no tab":     "0 No Error\n",
		"no message": "0\t\n",
	} {
		assert.Panics(t, func() { parseExporterMessages(tsv) }, name)
	}
	assert.Equal(t, []string{"a", "b"}, parseExporterMessages("# c\n0\ta\n\n1\tb"))
}
