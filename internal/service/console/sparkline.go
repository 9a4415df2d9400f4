package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// Sparkline size, in CSS pixels.
const (
	sparkWidth  = 120
	sparkHeight = 24
)

// sparkline draws values (oldest first; a negative value is a gap, a sample
// without the queue's count) as a small inline SVG polyline scaled to its
// largest value, with the range in its title. It contains only numbers
// and the title's text, escaped.
func sparkline(values []float64, window time.Duration) template.HTML {
	peak, last := 0.0, -1.0
	n := 0
	for _, v := range values {
		if v >= 0 {
			peak, last, n = max(peak, v), v, n+1
		}
	}
	var b strings.Builder
	title := "no samples yet"
	if n > 0 {
		title = fmt.Sprintf("%s: peak %g, now %g (%d samples)", window, peak, last, n)
	}
	fmt.Fprintf(&b, `<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`,
		sparkWidth, sparkHeight, sparkWidth, sparkHeight, template.HTMLEscapeString(title), template.HTMLEscapeString(title))
	scale := float64(sparkHeight-4) / max(peak, 1)
	step := float64(sparkWidth-2) / float64(max(len(values)-1, 1))
	var pts []string
	flush := func() {
		if len(pts) == 1 {
			pts = append(pts, pts[0]) // a lone sample still shows
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="%s"/>`, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	for i, v := range values {
		if v < 0 {
			flush()
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", 1+float64(i)*step, float64(sparkHeight-2)-v*scale))
	}
	flush()
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers and escaped text only
}
