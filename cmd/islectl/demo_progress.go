package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// How often the progress line is drawn: redrawn in place on a terminal,
// printed as a new line otherwise (a log, a pipe, CI).
const (
	progressTTYEvery   = 200 * time.Millisecond
	progressPlainEvery = 5 * time.Second
	progressBarWidth   = 24
	progressTTYWidth   = 79 // the line on a terminal, cut to fit 80 columns
)

// progress draws a status line on w until stopped. status says how far the
// work is (0..1) and what to show beside the bar.
type progress struct {
	w      io.Writer
	tty    bool
	label  string
	status func() (float64, string)
	began  time.Time

	stopOnce sync.Once
	stopped  chan struct{}
	done     chan struct{}
	width    int // of the last line drawn on a terminal
}

// startProgress draws the line every tick (progressTTYEvery on a terminal,
// progressPlainEvery otherwise) until stop.
func startProgress(w io.Writer, tty bool, label string, status func() (float64, string)) *progress {
	p := &progress{w: w, tty: tty, label: label, status: status, began: time.Now(),
		stopped: make(chan struct{}), done: make(chan struct{})}
	every := progressPlainEvery
	if tty {
		every = progressTTYEvery
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopped:
				p.draw(true)
				return
			case <-t.C:
				p.draw(false)
			}
		}
	}()
	return p
}

// stop draws the final line and ends it.
func (p *progress) stop() {
	p.stopOnce.Do(func() { close(p.stopped) })
	<-p.done
}

func (p *progress) draw(final bool) {
	frac, text := p.status()
	line := progressLine(p.label, frac, time.Since(p.began), text)
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	if len(line) > progressTTYWidth {
		line = line[:progressTTYWidth-3] + "..." // a wrapped line cannot be redrawn
	}
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n) // wipe what a longer line left
	}
	p.width = len(line)
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(p.w, "\r%s%s%s", line, pad, end)
}

// progressLine is "label [#####-----]  45%  12s  text".
func progressLine(label string, frac float64, elapsed time.Duration, text string) string {
	frac = min(max(frac, 0), 1)
	filled := int(frac * progressBarWidth)
	bar := strings.Repeat("#", filled) + strings.Repeat("-", progressBarWidth-filled)
	return fmt.Sprintf("%-8s [%s] %3d%%  %3ds  %s", label, bar, int(frac*100), int(elapsed.Seconds()), text)
}

// isTerminal reports whether w is a terminal, where a line can be redrawn.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
