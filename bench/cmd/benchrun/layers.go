package main

// Where the CPU of a request goes, by layer: with -profile, every run's CPU profile is split by
// the layer each sample was spent in, and the report gives each layer's share of the scenario's
// median CPU per request. A sample belongs to the first frame, from the leaf up, that is in a
// layer; frames of the runtime and of the standard library's utilities (allocation, copying,
// strconv, sync) are passed over, so that an allocation counts for the layer that asked for it.
// A sample with no frame in a layer is the runtime's own (GC, scheduler).

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"usersd/bench/internal/layers"
)

// sampleLayer is the layer of one sample: that of its first frame, from the leaf, in a layer.
func sampleLayer(s *profile.Sample) string {
	for _, loc := range s.Location {
		for _, line := range loc.Line { // inlined callees first
			if line.Function == nil {
				continue
			}
			if layer := layers.Of(line.Function.Name); layer != "" {
				return layer
			}
		}
	}
	return layers.Runtime
}

// layerShares reads profiles and returns each layer's share of their CPU (shares sum to 1).
func layerShares(paths []string) (map[string]float64, error) {
	cpu := map[string]int64{}
	var total int64
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		value := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
		if value < 0 {
			return nil, fmt.Errorf("%s: not a CPU profile", path)
		}
		for _, s := range p.Sample {
			cpu[sampleLayer(s)] += s.Value[value]
			total += s.Value[value]
		}
	}
	if total == 0 {
		return nil, fmt.Errorf("no samples in %s", strings.Join(paths, ", "))
	}
	shares := make(map[string]float64, len(cpu))
	for layer, v := range cpu {
		shares[layer] = float64(v) / float64(total)
	}
	return shares, nil
}

// layersReport is the report's section on where each profiled scenario's CPU went: µs per request
// by layer (its share of the profiles, times the scenario's median CPU per request).
func (r *runner) layersReport(todo []scenario, sums map[string]*summary) string {
	if r.profileDir == "" {
		return ""
	}
	var cols []scenario
	perReq := map[string]map[string]float64{}
	rows := map[string]bool{}
	var problems []string
	for _, sc := range todo {
		s := sums[sc.id]
		if sc.bin != "" || s == nil || s.runs == 0 {
			continue
		}
		var paths []string // this run's rounds only: the folder may hold an earlier run's
		for round := 1; round <= r.rounds; round++ {
			if path := r.profilePath(round, sc); fileExists(path) {
				paths = append(paths, path)
			}
		}
		if len(paths) == 0 {
			continue
		}
		shares, err := layerShares(paths)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", sc.id, err))
			continue
		}
		cols = append(cols, sc)
		perReq[sc.id] = map[string]float64{}
		for layer, share := range shares {
			perReq[sc.id][layer] = share * s.cpu
			rows[layer] = true
		}
	}
	if len(cols) == 0 {
		return strings.Join(problems, "\n")
	}
	names := make([]string, 0, len(rows))
	for layer := range rows {
		names = append(names, layer)
	}
	slices.Sort(names)

	var b strings.Builder
	b.WriteString("\n## Where the CPU goes, by layer (pprof)\n\n")
	b.WriteString("µs of CPU per request in each layer: the layer's share of the scenario's CPU profiles (every round), times its median CPU per request. A sample counts for the first frame from the leaf that is in a layer; allocation, copying and the standard library's utilities count for the layer that called them.\n\n| Layer |")
	for _, sc := range cols {
		fmt.Fprintf(&b, " %s |", sc.id)
	}
	b.WriteString("\n|---|")
	for range cols {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, layer := range names {
		fmt.Fprintf(&b, "| %s |", layer)
		for _, sc := range cols {
			if v, ok := perReq[sc.id][layer]; ok && v >= 0.05 {
				fmt.Fprintf(&b, " %.1f |", v)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| **total** |")
	for _, sc := range cols {
		fmt.Fprintf(&b, " **%.1f** |", sums[sc.id].cpu)
	}
	b.WriteString("\n")
	for _, p := range problems {
		fmt.Fprintf(&b, "\n%s\n", p)
	}
	return b.String()
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
