package xid

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
)

func TestSeverityStringAndOTel(t *testing.T) {
	tests := []struct {
		s    Severity
		text string
		otel plog.SeverityNumber
		num  int32
	}{
		{Info, "info", plog.SeverityNumberInfo, 9},
		{Warning, "warning", plog.SeverityNumberWarn, 13},
		{Error, "error", plog.SeverityNumberError, 17},
		{Critical, "critical", plog.SeverityNumberFatal, 21},
	}
	for _, tt := range tests {
		assert.True(t, tt.s.Valid())
		assert.Equal(t, tt.text, tt.s.String())
		assert.Equal(t, tt.otel, tt.s.OTel())
		assert.Equal(t, tt.num, int32(tt.s.OTel()))
	}
	assert.False(t, Severity(0).Valid())
	assert.Equal(t, "severity(0)", Severity(0).String())
	assert.Equal(t, plog.SeverityNumberUnspecified, Severity(9).OTel())
	assert.Less(t, Info, Warning, "severities order by urgency")
	assert.Less(t, Error, Critical)
}

func TestParseSeverity(t *testing.T) {
	for in, want := range map[string]Severity{
		"info": Info, "warning": Warning, "error": Error, "critical": Critical,
		"CRITICAL": Critical, " Warning ": Warning,
	} {
		got, err := ParseSeverity(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "warn", "fatal", "severe", "1"} {
		_, err := ParseSeverity(bad)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "dcgmreceiver: xid: unknown severity")
	}
}

func TestSeverityText(t *testing.T) {
	var s Severity
	require.NoError(t, s.UnmarshalText([]byte("error")))
	assert.Equal(t, Error, s)
	out, err := s.MarshalText()
	require.NoError(t, err)
	assert.Equal(t, "error", string(out))

	require.Error(t, s.UnmarshalText([]byte("loud")))
	assert.Equal(t, Error, s, "a failed unmarshal leaves the value alone")
	_, err = Severity(0).MarshalText()
	require.Error(t, err)
}
