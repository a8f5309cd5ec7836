package main

import "math"

// trend is the straight line fitted to one series (RSS, open files...) over
// the second half of the soak, and whether it shows growth.
type trend struct {
	Mean  float64 // of the samples fitted
	Slope float64 // units per hour
	// Rise is what the fitted line climbs from the first sample fitted to
	// the last: Slope times the span.
	Rise float64
	// Noise is the standard deviation of the samples around the line.
	Noise float64
	// Growing: Rise is above twice Noise and above 5% of Mean (see fit).
	Growing bool
}

// growthShare is the least rise over the second half, as a share of the
// mean, that counts as growth: smaller drifts are within what a garbage
// collected heap and Pebble's caches wander by.
const growthShare = 0.05

// fit fits y = a + b·t by least squares to the samples at hours t, and
// judges the trend. A series shows growth when the line's rise over the
// samples is more than twice the samples' scatter around it (the rise is not
// noise) and more than growthShare of the series' mean (it is not a
// negligible drift). A flat or falling series, or one with fewer than three
// samples, shows none.
func fit(t, y []float64) trend {
	n := float64(len(t))
	if len(t) != len(y) || len(t) < 3 {
		return trend{}
	}
	var st, sy float64
	for i := range t {
		st += t[i]
		sy += y[i]
	}
	mt, my := st/n, sy/n
	var stt, sty float64
	for i := range t {
		stt += (t[i] - mt) * (t[i] - mt)
		sty += (t[i] - mt) * (y[i] - my)
	}
	tr := trend{Mean: my}
	if stt == 0 {
		return tr
	}
	tr.Slope = sty / stt
	a := my - tr.Slope*mt
	var ss float64
	for i := range t {
		r := y[i] - (a + tr.Slope*t[i])
		ss += r * r
	}
	tr.Noise = math.Sqrt(ss / (n - 2))
	tr.Rise = tr.Slope * (t[len(t)-1] - t[0])
	tr.Growing = tr.Rise > 2*tr.Noise && tr.Rise > growthShare*math.Abs(tr.Mean)
	return tr
}
