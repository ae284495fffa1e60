package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs a short brownout and checks what the command promises:
// every operation sent is recorded, the samples add up to the total, and
// the CSV and the chart are written. Rates depend on chance and load, so
// they are not asserted.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	cfg := config{
		duration: 1500 * time.Millisecond, rps: 100, interval: 500 * time.Millisecond, brownout: true,
		listen: "127.0.0.1:0", csvPath: filepath.Join(dir, "b.csv"), svgPath: filepath.Join(dir, "b.svg"),
	}
	var out bytes.Buffer
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	sent := field(t, out.String(), "operations sent:")
	recorded := field(t, out.String(), "operations recorded:")
	if sent == 0 || sent != recorded {
		t.Errorf("sent %v operations, recorded %v; want the same, not 0", sent, recorded)
	}
	for _, want := range []string{"first-attempt success:", "retries per operation:", "stop reasons:", "phase brownout",
		"attempts by result:       ", "success=", "waits by cause:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	f, err := os.Open(cfg.csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := readCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, s := range samples {
		total += s.operations
	}
	if total != sent || len(samples) == 0 {
		t.Errorf("%d samples hold %v operations; want at least 1 holding %v", len(samples), total, sent)
	}

	svg, err := os.ReadFile(cfg.svgPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkSVG(t, svg); n != len(chartLines) {
		t.Errorf("chart has %d polylines; want %d", n, len(chartLines))
	}
}

// field returns the number after label in the output.
func field(t *testing.T, out, label string) float64 {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(label) + `\s+([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q in:\n%s", label, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// checkSVG parses svg as XML and returns its number of polylines.
func checkSVG(t *testing.T, svg []byte) int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	n := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("chart is not valid XML: %v", err)
		}
		if e, ok := tok.(xml.StartElement); ok && e.Name.Local == "polyline" {
			n++
		}
	}
}

func TestRunRefusesNonLoopback(t *testing.T) {
	cfg := config{duration: time.Second, rps: 1, interval: time.Second, listen: "0.0.0.0:0"}
	if err := run(context.Background(), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("err = %v; want a refusal of a non-loopback address", err)
	}
}

func TestChart(t *testing.T) {
	phases := []phase{{"a", 2 * time.Second, 0.02}, {"b", 2 * time.Second, 0.5}}
	samples := []sample{
		{at: time.Second, finalSuccess: 1, firstAttemptSuccess: 0.98},
		{at: 2 * time.Second, finalSuccess: 1, firstAttemptSuccess: 0.97},
		{at: 3 * time.Second, finalSuccess: 0.8, firstAttemptSuccess: 0.5, retriesPerOp: 0.1, attempts5xx: 0.5},
		{at: 4 * time.Second, finalSuccess: 0.75, firstAttemptSuccess: 0.5, retriesPerOp: 0.1},
	}
	var b bytes.Buffer
	if err := writeChart(&b, "t <&>", "s", samples, phases); err != nil {
		t.Fatal(err)
	}
	if n := checkSVG(t, b.Bytes()); n != 5 {
		t.Errorf("%d polylines; want 5", n)
	}
	// The share of attempts ending in a 5xx: half of them at 2.5 s.
	if !strings.Contains(b.String(), `stroke="#f28e2b" stroke-width="2" points="146.5,340.0 327.5,340.0 508.5,194.0 689.5,340.0"`) {
		t.Errorf("5xx line not where expected:\n%s", b.String())
	}
	// x spans 56..780 for 4 s; y spans 48..340 for 100%..0%. The first
	// point of the final-success line is at 0.5 s and 100%.
	if !strings.Contains(b.String(), `points="146.5,48.0 327.5,48.0 508.5,106.4 689.5,121.0"`) {
		t.Errorf("final-success line not where expected:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "t &lt;&amp;&gt;") {
		t.Error("title not escaped")
	}
	if err := writeChart(io.Discard, "", "", nil, nil); err == nil {
		t.Error("a chart without phases drawn")
	}
}

func TestCSVRoundTrip(t *testing.T) {
	in := []sample{{at: 1500 * time.Millisecond, phase: "brownout", operations: 10, firstAttemptSuccess: 0.5,
		finalSuccess: 0.75, retriesPerOp: 0.25, budgetTokens: 3}}
	var b bytes.Buffer
	if err := writeCSV(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := readCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0] != in[0] {
		t.Errorf("read back %+v; want %+v", out, in)
	}
}
