package secret

import (
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// WatchOptions configure a Watcher. Every field is optional.
type WatchOptions struct {
	// Stat and Read reach the files (default os.Stat and a read bounded
	// by MaxFileBytes); tests inject their own.
	Stat func(path string) (fs.FileInfo, error)
	Read func(path string) ([]byte, error)
	// OnError is told of a re-read that failed: the secret keeps its
	// previous value. The error names the path, never a value.
	OnError func(path string, err error)
	// OnReload is told of a secret whose value changed.
	OnReload func(path string)
}

// Watcher re-reads file secrets whose files changed (size or modification
// time, as certreload follows a certificate), and swaps each new value in
// whole: a request that already read the old value keeps it, the next one
// reads the new. A file that fails to read or holds no valid value (a
// rotation caught half-written, a deleted file) leaves the old value in
// place, and the next Check tries again. It has no goroutine: its owner
// calls Check on a timer.
type Watcher struct {
	o WatchOptions

	mu    sync.Mutex
	files []watched // guarded by mu

	reloads, failures atomic.Uint64
}

type watched struct {
	s    Secret
	size int64
	mod  time.Time
}

// NewWatcher watches the file secrets among secrets (the others never
// change and are skipped), from their files' state now.
func NewWatcher(o WatchOptions, secrets ...Secret) *Watcher {
	if o.Stat == nil {
		o.Stat = os.Stat
	}
	if o.Read == nil {
		o.Read = readFile
	}
	w := &Watcher{o: o}
	for _, s := range secrets {
		if s.File() == "" {
			continue
		}
		f := watched{s: s, size: -1}
		if fi, err := o.Stat(s.File()); err == nil {
			f.size, f.mod = fi.Size(), fi.ModTime()
		}
		w.files = append(w.files, f)
	}
	return w
}

// Len returns how many file secrets w watches.
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.files)
}

// Check stats every watched file and re-reads those that changed since
// the last successful read.
func (w *Watcher) Check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.files {
		f := &w.files[i]
		path := f.s.File()
		fi, err := w.o.Stat(path)
		if err != nil {
			w.fail(path, err)
			continue
		}
		if fi.Size() == f.size && fi.ModTime().Equal(f.mod) {
			continue
		}
		fresh, err := fromFile(path, w.o.Read, f.s.p.doc)
		if err != nil {
			w.fail(path, err)
			continue
		}
		f.size, f.mod = fi.Size(), fi.ModTime()
		v := fresh.Reveal()
		if v == f.s.Reveal() {
			continue
		}
		f.s.p.v.Store(&v)
		w.reloads.Add(1)
		if w.o.OnReload != nil {
			w.o.OnReload(path)
		}
	}
}

func (w *Watcher) fail(path string, err error) {
	w.failures.Add(1)
	if w.o.OnError != nil {
		w.o.OnError(path, err)
	}
}

// Stats returns how many values changed and how many re-reads failed.
func (w *Watcher) Stats() (reloads, failures uint64) {
	return w.reloads.Load(), w.failures.Load()
}
