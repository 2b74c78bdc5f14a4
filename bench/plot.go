package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// pathStyle gives each path the same colour and marker in every plot.
var pathStyle = map[string]struct {
	label string
	color color.Color
	shape draw.GlyphDrawer
}{
	PathFast:     {"shardtail fast path", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, draw.CircleGlyph{}},
	PathDataflow: {"shardtail dataflow path", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, draw.BoxGlyph{}},
	PathPostgres: {"PostgreSQL (SELECT *)", color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, draw.PyramidGlyph{}},
}

// plotStorms draws metric against N for every path with storms, on a
// logarithmic y axis (the paths differ by orders of magnitude), as a PNG.
func plotStorms(file string, res *Results, title, ylabel string, metric func(*StormResult) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "clients subscribing at once (N)"
	p.Y.Label.Text = ylabel + ", log scale"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	var ns []float64
	ymin, ymax := math.Inf(1), math.Inf(-1)
	lines := 0
	for _, name := range reportPaths {
		pr := res.Paths[name]
		if pr == nil {
			continue
		}
		var xys plotter.XYs
		var labels []string
		for _, s := range pr.Storms {
			y := metric(s)
			// A storm where no client finished has no value; a log
			// axis cannot show zero.
			if s.Completed == 0 || y <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(s.Clients), Y: y})
			lbl := short(y)
			if s.Aborted != "" {
				lbl += " (aborted: memory guard)"
			}
			labels = append(labels, lbl)
			ns = append(ns, float64(s.Clients))
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
		if len(xys) == 0 {
			continue
		}
		st := pathStyle[name]
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, line.Width = st.color, vg.Points(2)
		points.Color, points.Shape, points.Radius = st.color, st.shape, vg.Points(4)
		p.Add(line, points)
		p.Legend.Add(st.label, line, points)
		for i, xy := range xys {
			lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{xy}, Labels: []string{labels[i]}})
			if err == nil {
				lbl.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(2)}
				p.Add(lbl)
			}
		}
		lines++
	}
	if lines == 0 {
		return errors.New(title + ": nothing to plot")
	}
	// Ticks at the measured N; room around the points.
	var ticks []plot.Tick
	seen := map[float64]bool{}
	for _, n := range ns {
		if !seen[n] {
			seen[n] = true
			ticks = append(ticks, plot.Tick{Value: n, Label: fmt.Sprint(int(n))})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	xmin, xmax := ns[0], ns[0]
	for _, n := range ns {
		xmin, xmax = math.Min(xmin, n), math.Max(xmax, n)
	}
	pad := math.Max((xmax-xmin)*0.08, xmax*0.1)
	p.X.Min, p.X.Max = math.Max(0, xmin-pad), xmax+pad*3
	// Headroom above the highest point for the legend.
	p.Y.Min, p.Y.Max = ymin/2, ymax*12
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}

// short formats a value for a point label.
func short(v float64) string {
	switch {
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	case v >= 0.01:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
