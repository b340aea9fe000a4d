package ras

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readFixture(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ras-status.json"))
	require.NoError(t, err)
	return data
}

func TestDecodeStatusFixture(t *testing.T) {
	st, err := decodeStatus(bytes.NewReader(readFixture(t)))
	require.NoError(t, err)

	assert.Equal(t, "2.29.1", st.NCCLVersion)
	assert.Equal(t, 13000, st.CUDARuntimeVersion)
	assert.Equal(t, 13000, st.CUDADriverVersion)
	assert.Equal(t, "2025-12-19 13:06:53", st.Timestamp)
	assert.Equal(t, 1, st.CommunicatorsCount)
	assert.Equal(t, Collection{CollectionTimeSec: 0, TimeoutsCount: 0}, st.RAS)
	require.Len(t, st.Communicators, 1)

	comm := st.Communicators[0]
	assert.Equal(t, "0xae94423cfbb2ef4a", comm.Hash)
	assert.Equal(t, "0xb7e7187447156001:0xb8242ed28a71381e", comm.SecondaryHash)
	assert.Equal(t, 2, comm.Size)
	assert.Equal(t, 1, comm.RanksCount)
	assert.Equal(t, 1, comm.MissingRanksCount)
	assert.Equal(t, []Rank{{
		Rank: 0, Host: "172.16.64.245", PID: 1524344, CUDADev: 0, NVMLDev: 0,
		Status: RankStatus{},
		CollectiveCounts: map[string]uint64{
			"Broadcast": 0, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0, "AllReduce": 0,
		},
	}}, comm.Ranks)
	assert.Equal(t, []MissingRank{{
		Rank: 1, Host: "172.16.64.245", PID: 1524345, CUDADev: 1, NVMLDev: 1,
		Status: MissingRankStatus{Unresponsive: true, ConsideredDead: false},
	}}, comm.MissingRanks)
}

func TestDecodeStatusToleratesUnknownFieldsAndTrailingBytes(t *testing.T) {
	doc := `{"nccl_version": "2.30.0", "new_top_level": [1, 2], "communicators": [
	  {"hash": "0x1", "size": 1, "ranks_count": 1, "future": {"x": 1},
	   "ranks": [{"rank": 0, "collective_counts": {"AllToAll": 3}}], "missing_ranks": []}]}
	trailing text the server would never send`
	st, err := decodeStatus(strings.NewReader(doc))
	require.NoError(t, err)
	assert.Equal(t, "2.30.0", st.NCCLVersion)
	require.Len(t, st.Communicators, 1)
	assert.Equal(t, map[string]uint64{"AllToAll": 3}, st.Communicators[0].Ranks[0].CollectiveCounts)
}

// Replies the client cannot use fail with what went wrong and where.
func TestStatusReplyErrors(t *testing.T) {
	fixture := readFixture(t)
	tests := []struct {
		name    string
		input   []byte
		wantMsg string
		wantIs  error
	}{
		{name: "empty", input: nil, wantMsg: "no JSON document in the reply (0 bytes)", wantIs: io.ErrUnexpectedEOF},
		{name: "only whitespace", input: []byte("\n \n"), wantMsg: "no JSON document", wantIs: io.ErrUnexpectedEOF},
		{name: "truncated", input: fixture[:len(fixture)/2], wantMsg: "before the JSON document was complete", wantIs: io.ErrUnexpectedEOF},
		{name: "text format", input: []byte("NCCL version 2.29.1 compiled with CUDA 13.0\n"), wantMsg: "decoding JSON"},
		{name: "not a status", input: []byte(`{"hello": "world"}`), wantMsg: "not a RAS STATUS document"},
		{name: "null", input: []byte(`null`), wantMsg: "not a RAS STATUS document"},
		{name: "wrong type", input: []byte(`{"nccl_version": 2.29}`), wantMsg: "decoding JSON"},
		{name: "negative count", input: []byte(`{"nccl_version": "x", "communicators": [{"ranks": [{"collective_counts": {"AllReduce": -1}}]}]}`), wantMsg: "decoding JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fakeRAS(t, newRASServer(tt.input).handle)
			st, err := New(addr, 5*time.Second, nil).Status(context.Background())
			require.Error(t, err)
			assert.Nil(t, st)
			assert.Contains(t, err.Error(), "ncclflightreceiver: ras "+addr+": reading the reply to STATUS: ")
			assert.Contains(t, err.Error(), tt.wantMsg)
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
		})
	}
}

func TestStatusTime(t *testing.T) {
	st, err := decodeStatus(bytes.NewReader(readFixture(t)))
	require.NoError(t, err)
	when, err := st.Time(time.UTC)
	require.NoError(t, err)
	assert.Equal(t, time.Date(2025, 12, 19, 13, 6, 53, 0, time.UTC), when)

	st.Timestamp = "yesterday"
	_, err = st.Time(time.UTC)
	assert.ErrorContains(t, err, `STATUS timestamp "yesterday"`)
}

func TestCountingReaderCounts(t *testing.T) {
	counter := &countingReader{r: bytes.NewReader([]byte("12345"))}
	data, err := io.ReadAll(counter)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(data))
	assert.EqualValues(t, 5, counter.n)
}

// FuzzDecodeStatus checks that no input makes the parser or the findings panic, and that what parses
// yields findings with keys and messages.
func FuzzDecodeStatus(f *testing.F) {
	fixture := readFixture(f)
	f.Add(fixture)
	f.Add(fixture[:len(fixture)/2])
	f.Add([]byte(`{"nccl_version": "2.29.1", "communicators": [{"hash": "0x1", "size": 3, "ranks_count": 2,
	  "ranks": [{"rank": 0, "status": {"async_error": 6, "abort_flag": true}, "collective_counts": {"AllReduce": 5}},
	            {"rank": 2, "collective_counts": {"AllReduce": 4}}],
	  "missing_ranks": [{"rank": 1, "status": {"considered_dead": true}}]}], "ras": {"timeouts_count": 1}}`))
	f.Add([]byte(`{"nccl_version": "x", "communicators": [{"size": -5, "ranks_count": 9223372036854775807}]}`))
	f.Add([]byte("ERROR: Unknown command STATUS\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeStatus(bytes.NewReader(data))
		if err != nil {
			require.Nil(t, st)
			return
		}
		_, _ = st.Time(time.UTC)
		for _, finding := range Findings(st, "fuzz-job") {
			require.NotEmpty(t, finding.Key())
			require.NotEmpty(t, finding.Message)
		}
	})
}
