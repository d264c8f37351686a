package profile

import (
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The HTML report must open in a real browser: these tests drive Debian's
// chromium headless. They fail, not skip, where it is missing.
const chromiumInstall = "apt-get update && apt-get install -y --no-install-recommends chromium"

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("headless Chromium is needed to test the HTML report and is not installed; install it with: %s", chromiumInstall)
	return ""
}

// runChromium opens file:// path headless with the given extra flags and
// returns what it printed.
func runChromium(t *testing.T, path string, extra ...string) (stdout, stderr string) {
	t.Helper()
	tmp := t.TempDir()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(tmp, "profile")}
	args = append(append(args, extra...), "file://"+path)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+tmp)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(extra, " "), err, errb.String())
	}
	return out.String(), errb.String()
}

// consoleErrors returns the lines of Chromium's log (--enable-logging=stderr)
// that report a script error or any console message.
func consoleErrors(stderr string) []string {
	var bad []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "Uncaught") || strings.Contains(line, "ERROR:CONSOLE") || strings.Contains(line, ":CONSOLE") {
			bad = append(bad, line)
		}
	}
	return bad
}

func writeReportFile(t *testing.T) string {
	t.Helper()
	_, h := trainRun(t)
	path := filepath.Join(t.TempDir(), HTMLFile)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, cnnPlan(t), h, "headroom plan cnn"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHTMLInChromium: the report renders with the memory plot visible, its
// script runs, and the browser logs no console message or error.
func TestHTMLInChromium(t *testing.T) {
	page := writeReportFile(t)

	shot := filepath.Join(t.TempDir(), "shot.png")
	runChromium(t, page, "--screenshot="+shot, "--window-size=1200,900", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 1200 || b.Dy() != 900 {
		t.Errorf("screenshot is %dx%d, want 1200x900", b.Dx(), b.Dy())
	}
	nonWhite, param := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				nonWhite++
			}
			if near(r, g, bl, categoryColors[0]) {
				param++
			}
		}
	}
	t.Logf("screenshot: %d non-white pixels, %d of the param colour", nonWhite, param)
	if total := b.Dx() * b.Dy(); nonWhite < total/20 {
		t.Errorf("screenshot has %d non-white pixels of %d, want at least 5%%: the page looks blank", nonWhite, total)
	}
	// The plot's param band (persistent for the whole step) spans the plot's
	// width: thousands of pixels of its colour, far more than the swatches.
	if param < 5000 {
		t.Errorf("%d pixels of the param colour %s, want >= 5000: the memory plot is not visible", param, categoryColors[0])
	}

	dom, stderr := runChromium(t, page, "--enable-logging=stderr", "--v=0", "--dump-dom")
	for _, want := range []string{`<svg id="memory-plot"`, `<polygon class="area"`, `<svg id="arena-plot"`, `<table id="plan"`, `data-ready="1"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM Chromium built lacks %s", want)
		}
	}
	if bad := consoleErrors(stderr); len(bad) > 0 {
		t.Errorf("Chromium logged console messages or errors:\n%s", strings.Join(bad, "\n"))
	}
}

// TestChromiumHarnessSeesErrors keeps the console check honest: a page
// whose script throws is caught.
func TestChromiumHarnessSeesErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.html")
	page := `<!DOCTYPE html><html><body><svg id="memory-plot"></svg><script>notDefined();</script></body></html>`
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, stderr := runChromium(t, path, "--enable-logging=stderr", "--v=0", "--dump-dom")
	if !strings.Contains(dom, `id="memory-plot"`) {
		t.Errorf("dumped DOM lacks the page's svg:\n%s", dom)
	}
	bad := consoleErrors(stderr)
	if len(bad) == 0 || !strings.Contains(strings.Join(bad, "\n"), "notDefined") {
		t.Errorf("a page whose script throws gave console lines %q, want the ReferenceError", bad)
	}
}

// near reports whether a pixel (16-bit channels) is within a few levels of
// the colour "#rrggbb".
func near(r, g, b uint32, hex string) bool {
	var want [3]int
	for i := range want {
		v := 0
		for _, c := range hex[1+2*i : 3+2*i] {
			v = v*16 + strings.IndexRune("0123456789abcdef", c)
		}
		want[i] = v
	}
	got := [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
	for i := range got {
		if d := got[i] - want[i]; d > 6 || d < -6 {
			return false
		}
	}
	return true
}
