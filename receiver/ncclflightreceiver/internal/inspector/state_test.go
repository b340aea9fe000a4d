package inspector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarshalStateRoundTrip(t *testing.T) {
	states := map[string]FileState{
		"/d/h-pid1.log": {Offset: 42, Inode: 7, Fingerprint: 99, FingerprintLen: 42, SkipToNewline: true,
			Header:   &Header{CommID: "0x1", Rank: 3},
			Metadata: &Metadata{Hostname: "h", DumpTimestamp: time.UnixMicro(5).UTC()}},
		"/d/h-pid2.log": {},
	}
	b, err := MarshalState(states)
	require.NoError(t, err)
	got, err := UnmarshalState(b)
	require.NoError(t, err)
	assert.Equal(t, states, got)
}

func TestUnmarshalStateBadInput(t *testing.T) {
	got, err := UnmarshalState(nil)
	require.NoError(t, err)
	assert.Empty(t, got)

	got, err = UnmarshalState([]byte(`{"version":1}`))
	require.NoError(t, err)
	assert.NotNil(t, got)

	for in, want := range map[string]string{
		`{`:                        "unexpected end of JSON",
		`{"version":2,"files":{}}`: "version 2, want 1",
		`{"version":1,"files":{"x":{"offset":-1}}}`: "x: negative offset",
	} {
		_, err := UnmarshalState([]byte(in))
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), "ncclflightreceiver: decoding inspector tailer state")
	}
}
