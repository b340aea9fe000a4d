package nodeauthextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settleDelay is how long the watcher waits after the last change of the
// tokens file before reading it: an editor that truncates and then writes
// is read once, whole.
const settleDelay = 200 * time.Millisecond

// tokensFile holds the current load of the tokens file and re-reads it
// when it changes. It watches the file's directory, not the file: an
// atomic replace (mv, a Kubernetes Secret's ..data swap) creates a new
// inode that a watch on the old one would never see.
type tokensFile struct {
	path    string
	current atomic.Pointer[tokenSet]
	// reloaded is called after each read that followed a change, with the
	// new set or the error (the previous set stays).
	reloaded func(*tokenSet, error)

	watcher *fsnotify.Watcher
	stop    chan struct{}
	done    sync.WaitGroup
}

// load reads the file and makes it current.
func (f *tokensFile) load() (*tokenSet, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("tokens_file: %w", err)
	}
	set, err := parseTokens(f.path, data)
	if err != nil {
		return nil, fmt.Errorf("tokens_file: %w", err)
	}
	f.current.Store(set)
	return set, nil
}

// start loads the file (an error stops the collector's start) and watches
// it.
func (f *tokensFile) start() (*tokenSet, error) {
	set, err := f.load()
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("tokens_file %s: watch: %w", f.path, err)
	}
	if err := w.Add(filepath.Dir(f.path)); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("tokens_file %s: watch its directory: %w", f.path, err)
	}
	f.watcher = w
	f.stop = make(chan struct{})
	f.done.Add(1)
	go f.watch()
	return set, nil
}

// watch reloads the file settleDelay after the last event that concerns
// it: its own name, or a Kubernetes volume's ..data link.
func (f *tokensFile) watch() {
	defer f.done.Done()
	base := filepath.Base(f.path)
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	for {
		select {
		case <-f.stop:
			return
		case ev, ok := <-f.watcher.Events:
			if !ok {
				return
			}
			if n := filepath.Base(ev.Name); n == base || n == "..data" {
				settle.Reset(settleDelay)
			}
		case err, ok := <-f.watcher.Errors:
			if !ok {
				return
			}
			f.reloaded(nil, fmt.Errorf("tokens_file %s: watch: %w", f.path, err))
		case <-settle.C:
			set, err := f.load()
			f.reloaded(set, err)
		}
	}
}

// shutdown stops the watch.
func (f *tokensFile) shutdown() error {
	if f.watcher == nil {
		return nil
	}
	close(f.stop)
	err := f.watcher.Close()
	f.done.Wait()
	f.watcher = nil
	return err
}
