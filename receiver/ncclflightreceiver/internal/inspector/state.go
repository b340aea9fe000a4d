package inspector // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"

import (
	"encoding/json"
	"fmt"
)

// FileState is what a Tailer remembers of one file, to resume after a
// restart without reading lines twice.
type FileState struct {
	// Offset is the first byte not yet read (always just after a newline,
	// or inside an over-long line when SkipToNewline is set).
	Offset int64 `json:"offset"`
	// Inode identifies the file (0 where the platform has none). The device
	// is not kept: it can change across reboots for the same file.
	Inode uint64 `json:"inode,omitempty"`
	// Fingerprint is the FNV-1a hash of the first FingerprintLen bytes; a
	// file whose beginning differs is another file.
	Fingerprint    uint64 `json:"fingerprint,omitempty"`
	FingerprintLen int    `json:"fingerprint_len,omitempty"`
	// SkipToNewline says the offset is inside an over-long line.
	SkipToNewline bool `json:"skip_to_newline,omitempty"`
	// Header and Metadata are the last ones seen, for lines without them.
	Header   *Header   `json:"header,omitempty"`
	Metadata *Metadata `json:"metadata,omitempty"`
}

// State returns the state of every followed file, by path, as of the last
// records emitted. Save it after a Poll; give it to Restore after a restart.
func (t *Tailer) State() map[string]FileState {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]FileState, len(t.files))
	for p, tf := range t.files {
		st := tf.state
		if tf.context.HasHeader {
			h := tf.context.Header
			st.Header = &h
		}
		if tf.context.HasMetadata {
			m := tf.context.Metadata
			st.Metadata = &m
		}
		out[p] = st
	}
	return out
}

// Restore sets the state of the given files, which are followed from then
// on; call it before the first Poll. At the next Poll each file is checked
// against its state: another inode, a size below the offset or a different
// beginning mean the file was replaced meanwhile, and it is read from 0.
func (t *Tailer) Restore(states map[string]FileState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, st := range states {
		tf, ok := t.files[p]
		if !ok {
			tf = &tailedFile{path: p}
			t.files[p] = tf
		}
		_ = tf.close() // reopened and checked at the next Poll
		tf.restart()
		tf.state = st
		if st.Header != nil {
			tf.context.Header, tf.context.HasHeader = *st.Header, true
		}
		if st.Metadata != nil {
			tf.context.Metadata, tf.context.HasMetadata = *st.Metadata, true
		}
		tf.state.Header, tf.state.Metadata = nil, nil
	}
}

// stateVersion is the layout of MarshalState's output.
const stateVersion = 1

type savedState struct {
	Version int                  `json:"version"`
	Files   map[string]FileState `json:"files"`
}

// MarshalState encodes states for a storage extension.
func MarshalState(states map[string]FileState) ([]byte, error) {
	b, err := json.Marshal(savedState{Version: stateVersion, Files: states})
	if err != nil {
		return nil, fmt.Errorf("ncclflightreceiver: encoding inspector tailer state: %w", err)
	}
	return b, nil
}

// UnmarshalState decodes what MarshalState wrote. Empty input is no state.
func UnmarshalState(data []byte) (map[string]FileState, error) {
	if len(data) == 0 {
		return map[string]FileState{}, nil
	}
	var s savedState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("ncclflightreceiver: decoding inspector tailer state: %w", err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("ncclflightreceiver: decoding inspector tailer state: version %d, want %d", s.Version, stateVersion)
	}
	if s.Files == nil {
		s.Files = map[string]FileState{}
	}
	for p, st := range s.Files {
		if st.Offset < 0 || st.FingerprintLen < 0 {
			return nil, fmt.Errorf("ncclflightreceiver: decoding inspector tailer state: %s: negative offset or fingerprint length", p)
		}
	}
	return s.Files, nil
}
