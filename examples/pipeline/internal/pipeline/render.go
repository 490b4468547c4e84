package pipeline

import (
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// chartPanel is one plot of a chart: the series of one query over time.
type chartPanel struct {
	Title  string
	Unit   string   // suffix of the y-axis labels ("s"); may be empty
	Label  string   // the label whose value names each series in the legend
	Series []series // from [promClient.queryRange]
}

// errNoData is returned by renderChart when no panel has a single finite
// point: an empty picture would hide a broken pipeline.
var errNoData = errors.New("render: no finite data point to draw")

// Chart geometry, in pixels.
const (
	chartWidth   = 1200
	panelHeight  = 320
	headerHeight = 44
	marginLeft   = 80
	marginRight  = 280 // legend column
	marginTop    = 36  // panel title
	marginBottom = 30  // x-axis labels
)

var (
	colorBackground = color.RGBA{0xff, 0xff, 0xff, 0xff}
	colorText       = color.RGBA{0x22, 0x22, 0x22, 0xff}
	colorAxis       = color.RGBA{0x88, 0x88, 0x88, 0xff}
	colorGrid       = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	palette         = []color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
		{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
		{0xe3, 0x77, 0xc2, 0xff}, {0x17, 0xbe, 0xcf, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
		{0x7f, 0x7f, 0x7f, 0xff}, {0x00, 0x3f, 0x7f, 0xff}, {0x99, 0x00, 0x4c, 0xff},
	}
)

// renderChart draws the panels one under the other, on a shared time axis,
// as a PNG written to w. Only the standard library is used: lines are
// rasterised by hand and text comes from a built-in 5x7 font (upper case).
func renderChart(w io.Writer, title string, panels []chartPanel) error {
	start, end, ok := timeRange(panels)
	if !ok {
		return errNoData
	}
	img := image.NewRGBA(image.Rect(0, 0, chartWidth, headerHeight+len(panels)*panelHeight))
	fill(img, img.Bounds(), colorBackground)
	drawText(img, marginLeft, 12, title, 3, colorText)
	// One color per legend name across all panels, so a type keeps its color.
	names := map[string]bool{}
	for _, p := range panels {
		for _, s := range p.Series {
			names[legendName(s, p.Label)] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	colors := make(map[string]color.RGBA, len(sorted))
	for i, n := range sorted {
		colors[n] = palette[i%len(palette)]
	}
	for i, p := range panels {
		top := headerHeight + i*panelHeight
		drawPanel(img, top, p, start, end, colors)
	}
	return png.Encode(w, img)
}

// timeRange is the span of every finite point of every panel.
func timeRange(panels []chartPanel) (start, end time.Time, ok bool) {
	for _, p := range panels {
		for _, s := range p.Series {
			for _, pt := range s.Points {
				if math.IsNaN(pt.V) || math.IsInf(pt.V, 0) {
					continue
				}
				if !ok || pt.T.Before(start) {
					start = pt.T
				}
				if !ok || pt.T.After(end) {
					end = pt.T
				}
				ok = true
			}
		}
	}
	if ok && !end.After(start) {
		end = start.Add(time.Second)
	}
	return start, end, ok
}

func drawPanel(img *image.RGBA, top int, p chartPanel, start, end time.Time, colors map[string]color.RGBA) {
	plot := image.Rect(marginLeft, top+marginTop, chartWidth-marginRight, top+panelHeight-marginBottom)
	drawText(img, marginLeft, top+10, p.Title, 2, colorText)

	maxV := 0.0
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if !math.IsNaN(pt.V) && !math.IsInf(pt.V, 0) && pt.V > maxV {
				maxV = pt.V
			}
		}
	}
	top4 := niceCeil(maxV)

	// Grid and y labels: 0, 1/4, ..., top4.
	for i := 0; i <= 4; i++ {
		v := top4 * float64(i) / 4
		y := plot.Max.Y - int(math.Round(float64(plot.Dy())*float64(i)/4))
		hline(img, plot.Min.X, plot.Max.X, y, colorGrid)
		label := formatValue(v) + p.Unit
		drawText(img, plot.Min.X-8-textWidth(label, 1), y-3, label, 1, colorText)
	}
	// x labels: seconds since the start, at a readable step.
	span := end.Sub(start)
	step := niceStep(span)
	for d := time.Duration(0); d <= span; d += step {
		x := plot.Min.X + int(math.Round(float64(plot.Dx())*float64(d)/float64(span)))
		vline(img, x, plot.Min.Y, plot.Max.Y, colorGrid)
		label := "+" + strconv.Itoa(int(d/time.Second)) + "S"
		drawText(img, x-textWidth(label, 1)/2, plot.Max.Y+8, label, 1, colorText)
	}
	hline(img, plot.Min.X, plot.Max.X, plot.Max.Y, colorAxis)
	vline(img, plot.Min.X, plot.Min.Y, plot.Max.Y, colorAxis)

	series := append([]series(nil), p.Series...)
	sort.Slice(series, func(i, j int) bool { return legendName(series[i], p.Label) < legendName(series[j], p.Label) })
	for i, s := range series {
		c := colors[legendName(s, p.Label)]
		var prevX, prevY int
		havePrev := false
		for _, pt := range s.Points {
			if math.IsNaN(pt.V) || math.IsInf(pt.V, 0) {
				havePrev = false // a gap, not a drop to zero
				continue
			}
			x := plot.Min.X + int(math.Round(float64(plot.Dx())*float64(pt.T.Sub(start))/float64(span)))
			y := plot.Max.Y - int(math.Round(float64(plot.Dy())*pt.V/top4))
			if havePrev {
				line(img, prevX, prevY, x, y, c)
			} else {
				dot(img, x, y, c)
			}
			prevX, prevY, havePrev = x, y, true
		}
		// Legend entry.
		ly := plot.Min.Y + i*22
		if ly+14 <= plot.Max.Y {
			fill(img, image.Rect(plot.Max.X+20, ly, plot.Max.X+34, ly+14), c)
			drawText(img, plot.Max.X+42, ly, legendName(s, p.Label), 2, colorText)
		}
	}
}

func legendName(s series, label string) string {
	if v, ok := s.Labels[label]; ok && v != "" {
		return v
	}
	return "(" + label + " unset)"
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// niceStep picks the x-axis label step for a span: about six labels.
func niceStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
		15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute} {
		if span/s <= 8 {
			return s
		}
	}
	return 30 * time.Minute
}

// formatValue writes an axis value briefly: 3 significant digits.
func formatValue(v float64) string {
	return strings.ToUpper(strconv.FormatFloat(v, 'g', 3, 64))
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	fill(img, image.Rect(x0, y, x1+1, y+1), c)
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	fill(img, image.Rect(x, y0, x+1, y1+1), c)
}

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	fill(img, image.Rect(x-1, y-1, x+2, y+2), c)
}

// line draws a 2-pixel-wide segment (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		fill(img, image.Rect(x0, y0, x0+2, y0+2), c)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// textWidth is the width in pixels of s drawn at scale.
func textWidth(s string, scale int) int {
	return len([]rune(s)) * 6 * scale
}

// drawText writes s with its top-left corner at (x, y), each font pixel a
// scale x scale square. Letters are drawn upper case; a rune the font lacks
// is drawn as '?'.
func drawText(img *image.RGBA, x, y int, s string, scale int, c color.RGBA) {
	for _, r := range s {
		g, ok := glyphs[unicode.ToUpper(r)]
		if !ok {
			g = glyphs['?']
		}
		for row, bits := range g {
			for col := 0; col < 5; col++ {
				if bits&(1<<(4-col)) != 0 {
					fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
				}
			}
		}
		x += 6 * scale
	}
}
