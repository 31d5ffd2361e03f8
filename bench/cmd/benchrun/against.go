// Two builds of usersd, side by side: bench/run --against REV builds usersd at the git revision REV
// as well, and every usersd scenario then runs on both builds in each round, one after the other.
// A performance device (a buffer, a lazy context, a profile for the compiler) stays only if the
// build with it beats the build without it in the same run, where both met the same machine.
package main

import (
	"fmt"
	"strings"
)

// againstBin is the usersd built at the other revision, in the -bin folder.
const againstBin = "usersd-against"

// withAgainst puts after each usersd scenario its twin on the other build, whose id is the
// scenario's id and "@" and label.
func withAgainst(todo []scenario, label string) []scenario {
	if label == "" {
		return todo
	}
	var out []scenario
	for _, sc := range todo {
		out = append(out, sc)
		if sc.server != usersd {
			continue
		}
		twin := sc
		twin.id, twin.label, twin.bin, twin.compares = twinID(sc.id, label), sc.label+" @"+label, againstBin, nil
		out = append(out, twin)
	}
	return out
}

func twinID(id, label string) string { return id + "@" + label }

// againstReport is the section that compares each usersd scenario with its twin: the ratios of the
// medians, and the CPU per request of every round's pair, the steadier figure on a shared machine.
func againstReport(label string, todo []scenario, sums map[string]*summary, records []record) string {
	if label == "" {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### This build against %s\n\n", label)
	b.WriteString("Ratios of this build's medians to those of the build at " + label + ": req/s above 1, CPU per request and p50 below 1 mean this build is better.\n\n")
	b.WriteString("| Scenario | req/s | CPU µs/req | p50 | peak RSS | CPU µs/req by round (this / other) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|\n")
	for _, sc := range todo {
		if sc.server != usersd || sc.bin == againstBin {
			continue
		}
		this, other := sums[sc.id], sums[twinID(sc.id, label)]
		if this == nil || other == nil || len(this.rpsRounds) == 0 || len(other.rpsRounds) == 0 {
			fmt.Fprintf(&b, "| %s | failed | | | | |\n", sc.id)
			continue
		}
		var rounds []string
		for _, r := range records {
			if r.scenario != sc.id || r.err != nil {
				continue
			}
			for _, t := range records {
				if t.scenario == twinID(sc.id, label) && t.round == r.round && t.err == nil {
					rounds = append(rounds, fmt.Sprintf("%.1f / %.1f", r.cpuPerReq, t.cpuPerReq))
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %.2fx | %.2fx | %.2fx | %.1f / %.1f MiB | %s |\n", sc.id,
			this.rps/other.rps, this.cpu/other.cpu, this.p50/other.p50,
			float64(this.rssKiB)/1024, float64(other.rssKiB)/1024, strings.Join(rounds, "; "))
	}
	return b.String()
}
