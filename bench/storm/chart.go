package main

import (
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// smooth is how many 100ms buckets the charts average: single buckets at
// 200 operations per second are too noisy for seven lines to be told
// apart.
const smooth = 5

// hitsChart writes an SVG of server hits per second over time, one line
// per run, with the phase boundaries marked.
func hitsChart(path, title string, runs []*run) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = "server hits/s (0.5 s mean)"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	if len(runs) == 0 {
		return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
	}
	phases := runs[0].phases
	n := min(int(total(phases)/bucket), len(runs[0].hitsAt))
	top := 0.0
	for i, r := range runs {
		pts := make(plotter.XYs, n)
		perSecond := movingAverage(r.hitsAt[:n], smooth)
		for j := range n {
			pts[j].X = (float64(j) + 0.5) * bucket.Seconds()
			pts[j].Y = perSecond[j] / bucket.Seconds()
			top = max(top, pts[j].Y)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.LineStyle.Width = vg.Points(1.2)
		l.LineStyle.Color = palette[i%len(palette)]
		l.LineStyle.Dashes = plotutil.Dashes(i)
		switch {
		case r.scenario == "fleet":
			fleetStyle(l, r, runs)
		case r.policy.key == "httpretry":
			// The line the chart is about: solid and heavier.
			l.LineStyle.Width = vg.Points(2.4)
			l.LineStyle.Dashes = nil
		}
		p.Add(l)
		p.Legend.Add(r.label(), l)
	}
	// Room above the lines for the legend; the phase names go along the
	// bottom, below the traffic.
	p.Y.Max = top * 1.45
	if runs[0].scenario == "fleet" {
		// Six lines, and the per-process ones high: a taller legend.
		p.Y.Max = top * 1.6
	}
	p.Legend.YOffs = -vg.Points(10) // clear of the title
	// A little room on the right keeps the last label inside the picture.
	p.X.Min, p.X.Max = 0, total(phases).Seconds()+0.3
	p.X.Tick.Marker = secondsTicker{}
	p.Y.Tick.Marker = plainTicks{}
	if err := markPhases(p, phases); err != nil {
		return err
	}
	p.Add(plotter.NewGrid())
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

// palette holds line colours that stay apart on white and for the common
// forms of colour blindness (Tableau 10, less its yellow).
var palette = []color.Color{
	color.RGBA{0x55, 0x55, 0x55, 0xff}, // grey
	color.RGBA{0xe1, 0x57, 0x59, 0xff}, // red
	color.RGBA{0x76, 0xb7, 0xb2, 0xff}, // teal
	color.RGBA{0x4e, 0x79, 0xa7, 0xff}, // blue
	color.RGBA{0xb0, 0x7a, 0xa1, 0xff}, // purple
	color.RGBA{0xf2, 0x8e, 0x2b, 0xff}, // orange
	color.RGBA{0x9c, 0x75, 0x5f, 0xff}, // brown
	color.RGBA{0x59, 0xa1, 0x4f, 0xff}, // green
}

// secondsTicker puts a labelled tick on every whole second, or every
// second one when there are more than 12, and a minor tick on the others.
type secondsTicker struct{}

func (secondsTicker) Ticks(lo, hi float64) []plot.Tick {
	step := 1
	if hi-lo > 12 {
		step = 2
	}
	var ts []plot.Tick
	for s := int(math.Ceil(lo)); float64(s) <= math.Floor(hi); s++ {
		t := plot.Tick{Value: float64(s)}
		if s%step == 0 {
			t.Label = strconv.Itoa(s)
		}
		ts = append(ts, t)
	}
	return ts
}

// plainTicks are gonum's default ticks labelled without trailing zeros:
// 250, not 250.00.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// movingAverage returns the mean of the n values centred on each index (n
// odd), or of those there are at the ends.
func movingAverage(v []int64, n int) []float64 {
	out := make([]float64, len(v))
	h := n / 2
	for i := range v {
		lo, hi := max(0, i-h), min(len(v), i+h+1)
		var sum int64
		for _, x := range v[lo:hi] {
			sum += x
		}
		out[i] = float64(sum) / float64(hi-lo)
	}
	return out
}

// contentionChart writes an SVG of one value of the contention runs
// against the number of clients, one line per jitter.
func contentionChart(path, title, ylabel string, cs []contention, y func(contention) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "clients"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	// A tick at every size measured; the margins keep the last label
	// inside the picture.
	var ticks []plot.Tick
	lo, hi := math.Inf(1), 0.0
	for _, c := range cs {
		if c.jitter == jitters()[0].name {
			ticks = append(ticks, plot.Tick{Value: float64(c.clients), Label: strconv.Itoa(c.clients)})
		}
		lo, hi = min(lo, float64(c.clients)), max(hi, float64(c.clients))
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Marker = plainTicks{}
	p.X.Min, p.X.Max = lo-0.05*(hi-lo), hi+0.05*(hi-lo)
	for i, j := range jitters() {
		var pts plotter.XYs
		for _, c := range cs {
			if c.jitter == j.name {
				pts = append(pts, plotter.XY{X: float64(c.clients), Y: y(c)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.LineStyle.Width = vg.Points(1.5)
		l.LineStyle.Color = palette[i%len(palette)]
		l.LineStyle.Dashes = plotutil.Dashes(i)
		s.Color = palette[i%len(palette)]
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(j.name, l, s)
	}
	p.Add(plotter.NewGrid())
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

// fleetStyle gives the runs of one fleet size one colour: a thin dashed
// line for a budget each, a heavy solid one for one budget in Redis.
func fleetStyle(l *plotter.Line, r *run, runs []*run) {
	var sizes []int
	for _, o := range runs {
		if !slices.Contains(sizes, o.processes) {
			sizes = append(sizes, o.processes)
		}
	}
	l.LineStyle.Color = palette[(1+slices.Index(sizes, r.processes))%len(palette)]
	if r.redis != nil {
		l.LineStyle.Width = vg.Points(2.4)
		l.LineStyle.Dashes = nil
		return
	}
	l.LineStyle.Width = vg.Points(1.2)
	l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
}

// markPhases draws a dashed line between phases and names each phase at
// the foot of its span.
func markPhases(p *plot.Plot, phases []phase) error {
	var at float64
	names := plotter.XYLabels{}
	for i, ph := range phases {
		names.XYs = append(names.XYs, plotter.XY{X: at + ph.dur.Seconds()/2, Y: p.Y.Max * 0.02})
		names.Labels = append(names.Labels, ph.name)
		at += ph.dur.Seconds()
		if i == len(phases)-1 {
			break
		}
		l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: p.Y.Max}})
		if err != nil {
			return err
		}
		l.LineStyle.Color = color.Gray{Y: 160}
		l.LineStyle.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
		p.Add(l)
	}
	labels, err := plotter.NewLabels(names)
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Color = color.Gray{Y: 100}
		labels.TextStyle[i].XAlign = -0.5
		labels.TextStyle[i].YAlign = 0
	}
	p.Add(labels)
	return nil
}
