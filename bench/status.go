package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Status is the progress line of a long run. On a terminal it redraws one
// line in place several times a second; elsewhere (a log file, CI) it
// prints a plain line every few seconds. A nil *Status prints nothing, so
// library code can report progress unconditionally.
type Status struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu     sync.Mutex
	phase  string        // mu must be held.
	detail func() string // mu must be held. May be nil.
	drawn  bool          // mu must be held. A status line is on screen.

	stop chan struct{}
	done chan struct{}
}

// NewStatus starts a status line on w; Close stops it.
func NewStatus(w io.Writer) *Status {
	s := &Status{w: w, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.tty = true
		}
	}
	every := 5 * time.Second
	if s.tty {
		every = 250 * time.Millisecond
	}
	go s.loop(every)
	return s
}

func (s *Status) loop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.draw()
			s.mu.Unlock()
		}
	}
}

// draw writes the current status. mu must be held.
func (s *Status) draw() {
	if s.phase == "" {
		return
	}
	line := fmt.Sprintf("[%s] %s", time.Since(s.start).Round(time.Second), s.phase)
	if s.detail != nil {
		line += ": " + s.detail()
	}
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K%s", line)
		s.drawn = true
	} else {
		fmt.Fprintln(s.w, line)
	}
}

// clear erases the status line on a terminal. mu must be held.
func (s *Status) clear() {
	if s.drawn {
		fmt.Fprint(s.w, "\r\033[K")
		s.drawn = false
	}
}

// Set names the current phase; detail, when not nil, is called at every
// redraw for live counters.
func (s *Status) Set(phase string, detail func() string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.detail = phase, detail
	if s.tty {
		s.draw()
	}
}

// Logf prints a line that stays (above the status line on a terminal).
func (s *Status) Logf(format string, args ...any) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	fmt.Fprintf(s.w, "[%s] %s\n", time.Since(s.start).Round(time.Second), fmt.Sprintf(format, args...))
}

// Close stops the status line and erases it.
func (s *Status) Close() {
	if s == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.mu.Lock()
	s.clear()
	s.mu.Unlock()
}
