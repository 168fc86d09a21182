package cli

import (
	"github.com/kubectl-bundle/kubectl-bundle/internal/units"

	"fmt"
	"io"
	"strings"
	"time"
)

// Progress draws a one-line progress bar (bytes, rate, ETA) on a terminal.
// Callers create one only when the stream is a terminal.
type Progress struct {
	w     io.Writer
	label string
	start time.Time
	last  time.Time
	drawn bool
}

// NewProgress returns a bar that writes to w.
func NewProgress(w io.Writer, label string) *Progress {
	return &Progress{w: w, label: label, start: time.Now()}
}

// Update redraws the bar at most five times a second.
func (p *Progress) Update(done, total int64) {
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond && done != total {
		return
	}
	p.last = now
	elapsed := now.Sub(p.start).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(done) / elapsed
	}
	const width = 30
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	if frac > 1 {
		frac = 1
	}
	fill := int(frac * width)
	eta := "--"
	switch {
	case total > 0 && done >= total:
		eta = "0s"
	case rate > 0 && total > done:
		eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r%s [%s%s] %s / %s  %s/s  ETA %s ", p.label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		HumanBytes(done), HumanBytes(total), HumanBytes(int64(rate)), eta)
	p.drawn = true
}

// Done clears the bar's line.
func (p *Progress) Done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// HumanBytes formats n in IEC units.
func HumanBytes(n int64) string { return units.IEC(n) }
