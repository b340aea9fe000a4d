package ras

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Status is the reply of NCCL RAS to `STATUS` in JSON format (NCCL >= 2.28.7),
// field for field as NCCL's jsonWriteHeader/jsonWriteRankData/... write it.
// The view is job-wide: every node's RAS gathers it from all NCCL processes.
type Status struct {
	NCCLVersion        string         `json:"nccl_version"`
	CUDARuntimeVersion int            `json:"cuda_runtime_version"`
	CUDADriverVersion  int            `json:"cuda_driver_version"`
	Timestamp          string         `json:"timestamp"` // server local time, "2006-01-02 15:04:05"
	CommunicatorsCount int            `json:"communicators_count"`
	Communicators      []Communicator `json:"communicators"`
	RAS                Collection     `json:"ras"`
}

// Collection describes how RAS gathered the data.
type Collection struct {
	CollectionTimeSec float64 `json:"collection_time_sec"`
	// TimeoutsCount > 0 means some processes did not answer in time: the data is incomplete.
	TimeoutsCount int `json:"timeouts_count"`
}

// Communicator is one NCCL communicator as seen across the job.
type Communicator struct {
	Hash string `json:"hash"` // commHash, "0x..."; not unique on its own
	// SecondaryHash is "hostHash:pidHash" of the communicator's rank 0; with Hash it identifies the communicator.
	SecondaryHash     string        `json:"secondary_hash"`
	Size              int           `json:"size"`        // ranks in the communicator
	RanksCount        int           `json:"ranks_count"` // ranks that reported
	MissingRanksCount int           `json:"missing_ranks_count"`
	Ranks             []Rank        `json:"ranks"`
	MissingRanks      []MissingRank `json:"missing_ranks"`
}

// Rank is a rank that reported its state. Host is "unknown" and PID -1 when RAS could not tell.
type Rank struct {
	Rank    int        `json:"rank"`
	Host    string     `json:"host"`
	PID     int        `json:"pid"`
	CUDADev int        `json:"cuda_dev"`
	NVMLDev int        `json:"nvml_dev"`
	Status  RankStatus `json:"status"`
	// CollectiveCounts is the number of collectives of each kind the rank has issued
	// (keys are NCCL's function names: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce, ...).
	CollectiveCounts map[string]uint64 `json:"collective_counts"`
}

// RankStatus carries ncclResult_t codes (0 success, 7 in progress) and the communicator's lifecycle flags.
type RankStatus struct {
	InitState      int  `json:"init_state"`
	AsyncError     int  `json:"async_error"`
	FinalizeCalled bool `json:"finalize_called"`
	DestroyFlag    bool `json:"destroy_flag"`
	AbortFlag      bool `json:"abort_flag"`
}

// MissingRank is a rank of the communicator whose state RAS could not get.
type MissingRank struct {
	Rank    int               `json:"rank"`
	Host    string            `json:"host"`
	PID     int               `json:"pid"`
	CUDADev int               `json:"cuda_dev"`
	NVMLDev int               `json:"nvml_dev"`
	Status  MissingRankStatus `json:"status"`
}

// MissingRankStatus says why a rank is missing. Unresponsive: its process did not answer RAS at all
// (otherwise it answered but no longer reports this communicator, e.g. after ncclCommDestroy/Abort).
// ConsideredDead: RAS has declared the process dead.
type MissingRankStatus struct {
	Unresponsive   bool `json:"unresponsive"`
	ConsideredDead bool `json:"considered_dead"`
}

// timestampLayout is strftime("%F %T"), what RAS writes.
const timestampLayout = "2006-01-02 15:04:05"

// Time parses Timestamp in loc. RAS writes the time in the server's local zone without an offset,
// so pass time.Local when the server is on this node (the default localhost endpoint).
func (s *Status) Time(loc *time.Location) (time.Time, error) {
	t, err := time.ParseInLocation(timestampLayout, s.Timestamp, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("ncclflightreceiver: ras: STATUS timestamp %q: %w", s.Timestamp, err)
	}
	return t, nil
}

// decodeStatus reads exactly one JSON document, a STATUS reply in JSON format, from r. Unknown fields are
// ignored (newer NCCL may add some); anything after the document is left unread, as the server closes the
// connection after it. Its errors say what went wrong, not where: callers add that.
func decodeStatus(r io.Reader) (*Status, error) {
	counter := &countingReader{r: r}
	var st Status
	if err := json.NewDecoder(counter).Decode(&st); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no JSON document in the reply (%d bytes): %w",
				counter.n, io.ErrUnexpectedEOF)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("reply ended after %d bytes before the JSON document was complete: %w",
				counter.n, err)
		}
		return nil, fmt.Errorf("decoding JSON (after reading %d bytes): %w", counter.n, err)
	}
	// A JSON value that is not a RAS status (e.g. `{}` or `null`) has no version.
	if st.NCCLVersion == "" {
		return nil, errors.New("not a RAS STATUS document (no nccl_version)")
	}
	return &st, nil
}

// countingReader counts bytes read so errors can say where the reply stopped.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
