package profile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/headroom-ml/headroom/compile"
)

func writeHTML(t *testing.T, p *compile.Plan, h *Run, title string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, p, h, title); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// externalRefs finds what would make a page reach outside itself.
var externalRefs = regexp.MustCompile(`(?i)(https?:|//[a-z0-9.-]+\.[a-z]{2,}/|<link\b|<iframe\b|<img\b|<object\b|<embed\b|@import|url\(|\bsrc\s*=|\bhref\s*=|\bxlink:href|<script[^>]*\bsrc)`)

func TestHTMLIsSelfContained(t *testing.T) {
	_, h := trainRun(t)
	for _, c := range testPlans(t) {
		t.Run(c.name, func(t *testing.T) {
			p := c.plan
			page := writeHTML(t, p, h, "report of "+c.name)
			if m := externalRefs.FindString(page); m != "" {
				i := strings.Index(page, m)
				t.Errorf("page refers outside itself: %q in %q", m, page[max(0, i-80):min(len(page), i+80)])
			}
			if n := strings.Count(page, "<script"); n != 1 {
				t.Errorf("%d script elements, want 1 (inline)", n)
			}
			for _, want := range []string{`<svg id="memory-plot"`, `<svg id="arena-plot"`, `<svg id="loss-plot"`, `<table id="plan"`, `<table id="layers"`, `<polygon class="area"`} {
				if !strings.Contains(page, want) {
					t.Errorf("page lacks %s", want)
				}
			}
			tl, err := newTimeline(p)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Count(page, `<polygon class="area"`), len(tl.used()); got != want {
				t.Errorf("%d areas in the memory plot, want one per category in use (%d)", got, want)
			}
			arena := 0
			for _, b := range p.Buffers {
				row := fmt.Sprintf(`<td class="n" data-v="%d">b%d</td>`, b.ID, b.ID)
				if !strings.Contains(page, row) {
					t.Errorf("plan table lacks buffer b%d (%s)", b.ID, b.Owner)
				}
				if b.Kind == compile.KindArena {
					arena++
				}
			}
			if got := strings.Count(page, `<rect class="buf"`); got != arena {
				t.Errorf("%d buffers in the arena plot, want %d", got, arena)
			}
			if got := strings.Count(page, `<circle class="loss"`); got != len(h.Epochs) {
				t.Errorf("%d loss points, want %d epochs", got, len(h.Epochs))
			}
			if strings.Contains(page, "ZgotmplZ") {
				t.Error("the template rejected a value (ZgotmplZ in the page)")
			}
		})
	}
}

func TestHTMLWithoutHistoryAndEscaping(t *testing.T) {
	p := gapPlan(t)
	p.Buffers[1].Owner = `dense/<script>alert("x")</script>`
	p.Buffers[1].Site = `a&b.go:1`
	page := writeHTML(t, p, nil, `<b>title</b>`)
	if strings.Contains(page, "loss-plot") {
		t.Error("loss plot without a history")
	}
	for _, bad := range []string{`<script>alert`, `<b>title</b>`, `a&b.go`} {
		if strings.Contains(page, bad) {
			t.Errorf("page holds unescaped %q", bad)
		}
	}
	if strings.Count(page, "<script") != 1 {
		t.Errorf("%d script elements, want 1", strings.Count(page, "<script"))
	}
}

func TestWriteAll(t *testing.T) {
	prog := mlpProgram(t)
	_, h := trainRun(t)
	dir := filepath.Join(t.TempDir(), "profile")
	if err := WriteAll(dir, prog.Plan, h, "mlp"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{PprofFile, HTMLFile, TraceFile}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", names, want)
	}
	f, err := os.Open(filepath.Join(dir, PprofFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(prof.Sample) != len(prog.Plan.Buffers) {
		t.Errorf("%d samples, want %d", len(prof.Sample), len(prog.Plan.Buffers))
	}
	bad := gapPlan(t)
	bad.Peak++
	if err := WriteAll(t.TempDir(), bad, nil, "bad"); err == nil {
		t.Error("WriteAll of an inconsistent plan: nil error")
	}
}
