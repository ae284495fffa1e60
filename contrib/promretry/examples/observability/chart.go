package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// A small hand-written SVG line chart: the demo's time series needs a
// few lines on one percentage axis, which does not warrant a plotting
// library's dependencies.

// Chart geometry, in SVG user units (pixels).
const (
	chartW, chartH = 800.0, 438.0
	marginL        = 56.0
	marginR        = 20.0
	marginT        = 48.0
	marginB        = 98.0
	plotW          = chartW - marginL - marginR
	plotH          = chartH - marginT - marginB
)

// line is one series of the chart: a value in [0, 1] per sample.
type line struct {
	label  string
	color  string
	dashed bool
	value  func(sample) float64
}

var chartLines = []line{
	{"final success (after retries)", "#4e79a7", false, func(s sample) float64 { return s.finalSuccess }},
	{"first-attempt success", "#e15759", false, func(s sample) float64 { return s.firstAttemptSuccess }},
	{"retries per operation (0.1 = 10%)", "#555555", true, func(s sample) float64 { return s.retriesPerOp }},
	{"attempts ending in a 5xx", "#f28e2b", false, func(s sample) float64 { return s.attempts5xx }},
	{"attempts ending in a timeout", "#76b7b2", false, func(s sample) float64 { return s.attemptsTimeout }},
}

// writeChart draws the samples as an SVG chart: one line per chartLines
// entry against time, with the phases marked and named below the axis.
func writeChart(w io.Writer, title, subtitle string, samples []sample, phases []phase) error {
	var b bytes.Buffer
	total := 0.0
	for _, p := range phases {
		total += p.dur.Seconds()
	}
	if total <= 0 {
		return fmt.Errorf("chart: no phases")
	}
	x := func(sec float64) float64 { return marginL + plotW*sec/total }
	y := func(v float64) float64 { return marginT + plotH*(1-math.Max(0, math.Min(1, v))) }

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%g" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, esc(title))
	fmt.Fprintf(&b, `<text x="%g" y="37" font-size="11" fill="#666">%s</text>`+"\n", marginL, esc(subtitle))

	// Phases: the worst one shaded, each named under the axis.
	worst := 0
	for i, p := range phases {
		if p.failRate > phases[worst].failRate {
			worst = i
		}
	}
	at := 0.0
	for i, p := range phases {
		x0, x1 := x(at), x(at+p.dur.Seconds())
		if i == worst && len(phases) > 1 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%g" width="%.1f" height="%g" fill="#f28e2b" fill-opacity="0.12"/>`+"\n", x0, marginT, x1-x0, plotH)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle" fill="#666">%s (%.0f%% of requests fail)</text>`+"\n",
			(x0+x1)/2, marginT+plotH+36, esc(p.name), p.failRate*100)
		at += p.dur.Seconds()
	}

	// Axes and grid: 0–100% every 25%, a tick every few seconds.
	for _, v := range []float64{0, .25, .5, .75, 1} {
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, y(v), marginL+plotW, y(v))
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end" dominant-baseline="middle">%.0f%%</text>`+"\n", marginL-6, y(v), v*100)
	}
	step := math.Max(1, math.Ceil(total/10))
	for s := 0.0; s <= total+1e-9; s += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%gs</text>`+"\n", x(s), marginT+plotH+16, s)
	}
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#888"/>`+"\n", marginL, marginT, plotW, plotH)

	// The lines, each sample at the middle of its interval.
	for i, l := range chartLines {
		pts := make([]string, 0, len(samples))
		for j, s := range samples {
			start := 0.0
			if j > 0 {
				start = samples[j-1].at.Seconds()
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x((start+s.at.Seconds())/2), y(l.value(s))))
		}
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="5,4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", l.color, dash, strings.Join(pts, " "))
		// Legend, in rows of three under the phase names.
		lx := marginL + 250*float64(i%3)
		ly := marginT + plotH + 56 + 18*float64(i/3)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+24, ly, l.color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", lx+30, ly, esc(l.label))
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// esc escapes text for SVG.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
