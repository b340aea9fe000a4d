// Package verify runs the checks an agent makes before its node returns to
// service: DCGM diagnostics at a level, and the node's link error counters
// steady over a window (internal/repair names them). Every Runner fails
// closed: a check that could not run returns an error, and a result passes
// only on positive evidence.
//
// # DCGM diagnostics (repair.CheckDiag)
//
// DiagRunner runs DCGM's diagnostic at the requested level (1 quick, 2
// medium, 3 long) on the requested GPUs, one run at a time, each bounded by
// its level's timeout, and returns one result per GPU. Two backends sit
// behind it. The command backend (NewCommandDiag) runs a configured
// command, by default `dcgmi diag -r {level} -j -i {gpus}`, in a process
// group of its own (SIGTERM on cancel, so dcgmi stops the diagnostic in the
// host engine, then SIGKILL to the group after a grace), keeps at most
// MaxDiagOutput bytes of its stdout and parses it with ParseDiagJSON, which
// reads DCGM 4's and DCGM 3's documents and refuses anything it does not
// understand. The library backend (NewLibraryDiag) calls go-dcgm's RunDiag
// through the DCGMLib seam, matching GPUs by UUID; no call reaches go-dcgm
// without a successful Init, and a build without cgo has only the command
// backend. A GPU passes only when at least one test passed on it and every
// result that concerns it passed or was skipped as not applicable (a
// warning passes only with AllowWarn); a failing test summary or a failing
// non-GPU entity fails every GPU of the run. The failing tests are listed
// with DCGM's message.
//
// # Links steady (repair.CheckLinksSteady)
//
// LinksRunner reads the nodestate extension's store at the end of the
// window that starts when Run is called: it waits spec.Window on its Clock,
// then up to a grace for the readings that close the window, and passes a
// GPU only when its NVLink error counters (CRC flit, CRC data, replay,
// recovery; at least one read) have a reading at or before the window's
// start and one at or after its end, did not grow and were not reset. The
// node's InfiniBand ports are judged the same way in one more result; a
// node without InfiniBand readings passes that part unless RequireIB is
// set. No reading is not steady.
package verify // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
