package pipeline

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"testing"
	"time"
)

// flat returns a series of n points, one a second from t0, all equal to v
// except the indices in gaps, which are NaN.
func flat(label string, t0 time.Time, n int, v float64, gaps ...int) series {
	s := series{Labels: map[string]string{"aion_activity_type": label}}
	for i := range n {
		p := point{T: t0.Add(time.Duration(i) * time.Second), V: v}
		for _, g := range gaps {
			if g == i {
				p.V = math.NaN()
			}
		}
		s.Points = append(s.Points, p)
	}
	return s
}

func sameColor(c color.Color, want color.RGBA) bool {
	r, g, b, _ := c.RGBA()
	return uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(b>>8) == want.B
}

// columnHas reports whether column x of the plot area has a pixel of color c.
func columnHas(img image.Image, x, y0, y1 int, c color.RGBA) bool {
	for y := y0; y <= y1; y++ {
		if sameColor(img.At(x, y), c) {
			return true
		}
	}
	return false
}

func TestRenderChart(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	// Two series sorted by name: "a" gets palette[0], "b" palette[1]. "a"
	// is 5 everywhere except a NaN gap at points 40-60 of 100.
	gaps := make([]int, 0, 21)
	for i := 40; i <= 60; i++ {
		gaps = append(gaps, i)
	}
	panels := []chartPanel{{
		Title: "in flight", Label: "aion_activity_type",
		Series: []series{flat("b", t0, 100, 2), flat("a", t0, 100, 5, gaps...)},
	}, {
		// Only "b": it keeps its color from the first panel.
		Title: "p99", Unit: "s", Label: "aion_activity_type",
		Series: []series{flat("b", t0, 100, 1)},
	}}
	var buf bytes.Buffer
	if err := renderChart(&buf, "test run", panels); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{chartWidth, headerHeight + 2*panelHeight}) {
		t.Fatalf("size = %v", got)
	}
	plotTop, plotBottom := headerHeight+marginTop, headerHeight+panelHeight-marginBottom
	plotLeft, plotRight := marginLeft, chartWidth-marginRight
	xAt := func(i int) int { return plotLeft + (plotRight-plotLeft)*i/99 }

	// niceCeil(5) = 5: series "a" runs along the top of the plot, "b" at 2/5.
	yA := plotBottom - (plotBottom-plotTop)*5/5
	yB := plotBottom - (plotBottom-plotTop)*2/5
	if !columnHas(img, xAt(20), yA-2, yA+2, palette[0]) {
		t.Error("series a not drawn at its value")
	}
	if !columnHas(img, xAt(20), yB-2, yB+2, palette[1]) {
		t.Error("series b not drawn at its value")
	}
	// The NaN gap is a gap: no color of "a" anywhere in that column.
	if columnHas(img, xAt(50), plotTop, plotBottom, palette[0]) {
		t.Error("series a drawn through its NaN gap")
	}
	if !columnHas(img, xAt(50), yB-2, yB+2, palette[1]) {
		t.Error("series b interrupted where it has data")
	}
	// Second panel: "b" at the top (niceCeil(1) = 1), in b's color.
	if !columnHas(img, xAt(20), plotTop+panelHeight-2, plotTop+panelHeight+2, palette[1]) {
		t.Error("series b changed color in the second panel")
	}
	// Title text: dark pixels in the header.
	if !columnHas(img, marginLeft+2, 0, headerHeight, colorText) {
		t.Error("no title drawn")
	}
	// Legend squares in series colors.
	if !sameColor(img.At(plotRight+25, plotTop+5), palette[0]) || !sameColor(img.At(plotRight+25, plotTop+27), palette[1]) {
		t.Error("legend entries missing or out of order")
	}
}

func TestRenderChartNoData(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	testCases := []struct {
		name   string
		panels []chartPanel
	}{
		{"no panels", nil},
		{"no series", []chartPanel{{Title: "x"}}},
		{"only NaN", []chartPanel{{Title: "x", Series: []series{flat("a", t0, 3, math.NaN())}}}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := renderChart(&buf, "t", tc.panels); !errors.Is(err, errNoData) {
				t.Errorf("renderChart = %v, want errNoData", err)
			}
			if buf.Len() != 0 {
				t.Error("wrote an image for no data")
			}
		})
	}
}

func TestNiceCeil(t *testing.T) {
	testCases := []struct{ in, want float64 }{
		{0, 1}, {-3, 1}, {math.NaN(), 1}, {0.7, 1}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {0.0031, 0.005}, {120, 200},
	}
	for _, tc := range testCases {
		if got := niceCeil(tc.in); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestFontCoversLabels(t *testing.T) {
	for _, r := range "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:-_()/%=+<>?[]{}\"*" {
		if _, ok := glyphs[r]; !ok {
			t.Errorf("no glyph for %q", r)
		}
	}
}
