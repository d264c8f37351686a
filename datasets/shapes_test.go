package datasets

import (
	"testing"
)

func TestShapes(t *testing.T) {
	tr, te := Shapes(50, 10, 24, 3)
	for _, e := range []*struct {
		name string
		n    int
	}{{"train", tr.N}, {"test", te.N}} {
		if (e.name == "train" && e.n != 50) || (e.name == "test" && e.n != 10) {
			t.Fatalf("%s: got %d examples", e.name, e.n)
		}
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if !tr.LabelShape.Equal([]int{24, 24}) || !tr.Shape.Equal([]int{24, 24, 1}) || tr.Classes != ShapeClasses {
		t.Fatalf("shapes: got example %v labels %v classes %d", tr.Shape, tr.LabelShape, tr.Classes)
	}
	var counts [ShapeClasses]int
	var grey [ShapeClasses]float64
	for i, l := range tr.Labels {
		counts[l]++
		grey[l] += float64(tr.Pixels[i])
	}
	for c, n := range counts {
		if n == 0 {
			t.Fatalf("class %d never drawn in 50 images", c)
		}
		grey[c] /= float64(n)
	}
	// every kind is brighter than the background on average, and the
	// background is the largest class
	for c := ShapeDisk; c < ShapeClasses; c++ {
		if grey[c] < grey[ShapeBackground]+40 {
			t.Errorf("class %d mean grey %.0f, background %.0f: want shapes brighter", c, grey[c], grey[ShapeBackground])
		}
		if counts[c] > counts[ShapeBackground] {
			t.Errorf("class %d has %d pixels, more than the background's %d", c, counts[c], counts[ShapeBackground])
		}
	}
	// the draw is a function of the seed
	again, _ := Shapes(50, 10, 24, 3)
	for i := range again.Labels {
		if again.Labels[i] != tr.Labels[i] || again.Pixels[i] != tr.Pixels[i] {
			t.Fatalf("pixel %d differs between two draws of seed 3", i)
		}
	}
	other, _ := Shapes(50, 10, 24, 4)
	same := 0
	for i := range other.Pixels {
		if other.Pixels[i] == tr.Pixels[i] {
			same++
		}
	}
	if same > len(other.Pixels)/2 {
		t.Errorf("seeds 3 and 4 share %d of %d pixels", same, len(other.Pixels))
	}
}
