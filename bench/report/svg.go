package report

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/baton-dev/baton/bench/result"
)

// Line is one series of a chart.
type Line struct {
	Name   string
	Color  string
	Points []result.Point
	// Dash, when set, is the line's stroke-dasharray ("5 3").
	Dash string
}

// Marker is a vertical line across a chart at X, labelled.
type Marker struct {
	X     float64
	Label string
}

// Chart is a line chart rendered as a standalone SVG document, with no
// dependency beyond the standard library.
type Chart struct {
	Title  string
	XLabel string
	YLabel string
	LogX   bool
	// YMax, when positive, fixes the top of the Y axis; the bottom is 0.
	YMax    float64
	Lines   []Line
	Markers []Marker
}

const (
	chartW, chartH                   = 760, 420
	marginL, marginR, marginT, margB = 78, 20, 58, 56
)

// Colors of the systems, the same in every chart.
var systemColors = map[string]string{
	result.SystemBaton:    "#1f5fbf",
	result.SystemEtcd:     "#d0342c",
	result.SystemPostgres: "#2e8b3e",
	result.SystemSQLite:   "#6b6b6b",
}

var spareColors = []string{"#8a4fbf", "#d98a1c", "#1c9aa8", "#6b6b6b"}

// SVG renders the chart.
func (c Chart) SVG() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, esc(c.Title))
	xmin, xmax, ymax := c.bounds()
	plotWidth := float64(chartW - marginL - marginR)
	px := func(x float64) float64 { return float64(marginL) + (x-xmin)/(xmax-xmin)*plotWidth }
	if c.LogX {
		lmin, lmax := math.Log10(xmin), math.Log10(xmax)
		px = func(x float64) float64 { return float64(marginL) + (math.Log10(x)-lmin)/(lmax-lmin)*plotWidth }
	}
	py := func(y float64) float64 {
		return float64(chartH-margB) - y/ymax*float64(chartH-marginT-margB)
	}
	// Axes and grid.
	plotL, plotR, plotT, plotB := float64(marginL), float64(chartW-marginR), float64(marginT), float64(chartH-margB)
	for _, t := range c.xTicks(xmin, xmax) {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x, plotT, x, plotB)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", x, plotB+16, tickLabel(t))
	}
	for _, t := range linearTicks(0, ymax) {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", plotL, y, plotR, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", plotL-6, y+4, tickLabel(t))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", plotL, plotT, plotR-plotL, plotB-plotT)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", (plotL+plotR)/2, chartH-14, esc(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (plotT+plotB)/2, esc(c.YLabel))
	// Markers.
	for _, m := range c.Markers {
		if m.X < xmin || m.X > xmax {
			continue
		}
		x := px(m.X)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="4 3"/>`+"\n", x, plotT, x, plotB)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555" font-size="11">%s</text>`+"\n", x+3, plotT+12, esc(m.Label))
	}
	// Lines.
	for i, l := range c.Lines {
		color := l.Color
		if color == "" {
			color = spareColors[i%len(spareColors)]
		}
		var pts []string
		for _, p := range l.Points {
			if c.LogX && p.X <= 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(min(max(p.X, xmin), xmax)), py(min(max(p.Y, 0), ymax))))
		}
		dash := ""
		if l.Dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, esc(l.Dash))
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
		}
		// The legend runs along the top margin, clear of the data.
		step := min(130, (plotR-plotL)/float64(len(c.Lines)))
		lx, ly := plotL+float64(i)*step, plotT-10
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"%s/>`+"\n", lx, ly-4, lx+22, ly-4, color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+28, ly, esc(l.Name))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// bounds returns the axes' ranges: X from the data, Y from 0.
func (c Chart) bounds() (xmin, xmax, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, l := range c.Lines {
		for _, p := range l.Points {
			if c.LogX && p.X <= 0 {
				continue
			}
			xmin, xmax = min(xmin, p.X), max(xmax, p.X)
			ymax = max(ymax, p.Y)
		}
	}
	for _, m := range c.Markers {
		xmax = max(xmax, m.X)
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	if c.LogX {
		xmin = math.Pow(10, math.Floor(math.Log10(xmin)))
		xmax = math.Pow(10, math.Ceil(math.Log10(xmax)))
	} else {
		xmin = min(xmin, 0)
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if c.YMax > 0 {
		ymax = c.YMax
	} else {
		ymax = niceCeil(ymax * 1.05)
	}
	if ymax <= 0 {
		ymax = 1
	}
	return xmin, xmax, ymax
}

func (c Chart) xTicks(lo, hi float64) []float64 {
	if !c.LogX {
		return linearTicks(lo, hi)
	}
	var ticks []float64
	decades := math.Log10(hi) - math.Log10(lo)
	for d := lo; d <= hi*1.0001; d *= 10 {
		ticks = append(ticks, d)
		if decades <= 3 {
			for _, k := range []float64{2, 5} {
				if d*k < hi {
					ticks = append(ticks, d*k)
				}
			}
		}
	}
	return ticks
}

// linearTicks returns about five round ticks from lo to hi.
func linearTicks(lo, hi float64) []float64 {
	step := niceStep((hi - lo) / 5)
	var ticks []float64
	for t := math.Ceil(lo/step) * step; t <= hi*1.0001; t += step {
		ticks = append(ticks, t)
	}
	return ticks
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// niceCeil rounds x up to a multiple of a nice step.
func niceCeil(x float64) float64 {
	if x <= 0 {
		return 1
	}
	s := niceStep(x / 5)
	return math.Ceil(x/s) * s
}

func tickLabel(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return thousands(v)
	case math.Abs(v) >= 1:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	default:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
	}
}

func esc(s string) string { return html.EscapeString(s) }
