// Command cglayers is bench/instructions --layers's table: the instructions per request that each
// layer spent itself. Callgrind's call graph is no use for Go (a goroutine switch leaves calls it
// never sees return), and for 1,000 REST GETs callgrind_annotate's costs by function added up to
// 111.0 million instructions of a dump of 87.5 million. The instruction addresses are exact
// (callgrind --dump-instr=yes): each address's count goes to the function of the binary's symbol
// table that holds it, and the function to its layer (bench/internal/layers). The instructions
// of the runtime and of the standard library's utilities form rows of their own rather than
// going to the layer that called them; bench/run --profile's table shows that split by caller.
//
//	cglayers -binary PROGRAM SCENARIO=REQUESTS=CALLGRIND-FILE...
package main

import (
	"bufio"
	"cmp"
	"debug/elf"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"usersd/bench/internal/layers"
)

// utilities is the row of the instructions that the runtime and the standard library's utilities
// spent themselves, for whichever layer called them.
const utilities = "Go runtime's other work, and the standard library's utilities (copying, maps, sync...)"

func main() {
	binary := flag.String("binary", "", "the program that callgrind ran")
	flag.Parse()
	if flag.NArg() == 0 || *binary == "" {
		log.Fatal("usage: cglayers -binary PROGRAM SCENARIO=REQUESTS=CALLGRIND-FILE...")
	}
	syms, err := readSymbols(*binary)
	if err != nil {
		log.Fatal(err)
	}
	// Valgrind names the program by its absolute path with every link resolved.
	if syms.path, err = filepath.Abs(*binary); err == nil {
		syms.path, err = filepath.EvalSymlinks(syms.path)
	}
	if err != nil {
		log.Fatal(err)
	}
	var scenarios []string
	perReq := map[string]map[string]float64{}
	rows := map[string]bool{}
	for _, arg := range flag.Args() {
		parts := strings.SplitN(arg, "=", 3)
		requests := 0
		if len(parts) == 3 {
			requests, _ = strconv.Atoi(parts[1])
		}
		if requests <= 0 {
			log.Fatalf("%q: want SCENARIO=REQUESTS=CALLGRIND-FILE", arg)
		}
		name, file := parts[0], parts[2]
		counts, err := layerCounts(file, syms)
		if err != nil {
			log.Fatalf("%s: %v", name, err)
		}
		scenarios = append(scenarios, name)
		perReq[name] = map[string]float64{}
		for layer, n := range counts {
			perReq[name][layer] = float64(n) / float64(requests)
			rows[layer] = true
		}
	}
	names := make([]string, 0, len(rows))
	for layer := range rows {
		names = append(names, layer)
	}
	slices.Sort(names)

	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprint(w, "| Layer (instructions it spent itself, per request) |")
	for _, s := range scenarios {
		fmt.Fprintf(w, " %s |", s)
	}
	fmt.Fprint(w, "\n|---|")
	for range scenarios {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, layer := range names {
		if !slices.ContainsFunc(scenarios, func(s string) bool { return perReq[s][layer] >= 5 }) {
			continue
		}
		fmt.Fprintf(w, "| %s |", layer)
		for _, s := range scenarios {
			if v := perReq[s][layer]; v >= 5 {
				fmt.Fprintf(w, " %s |", thousands(v))
			} else {
				fmt.Fprint(w, " |")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "| **total** |")
	for _, s := range scenarios {
		var total float64
		for _, v := range perReq[s] {
			total += v
		}
		fmt.Fprintf(w, " **%s** |", thousands(total))
	}
	fmt.Fprintln(w)
}

// symbols are a binary's functions by start address.
type symbols struct {
	path  string // the binary's absolute path, as callgrind names it
	start []uint64
	end   []uint64
	name  []string
}

func readSymbols(binary string) (*symbols, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", binary, err)
	}
	// Zero-size symbols (runtime.text and its kin) share addresses with real functions.
	syms = slices.DeleteFunc(syms, func(s elf.Symbol) bool {
		return elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Size == 0
	})
	slices.SortFunc(syms, func(a, b elf.Symbol) int { return cmp.Compare(a.Value, b.Value) })
	t := &symbols{}
	for _, s := range syms {
		t.start = append(t.start, s.Value)
		t.end = append(t.end, s.Value+s.Size)
		t.name = append(t.name, s.Name)
	}
	return t, nil
}

// function is the name of the function that holds addr, or "" when none does.
func (t *symbols) function(addr uint64) string {
	i, found := slices.BinarySearch(t.start, addr)
	if !found {
		i--
	}
	if i < 0 || addr >= t.end[i] {
		return ""
	}
	return t.name[i]
}

// outside is the row of the instructions spent outside the binary: the C library, the dynamic
// loader, the kernel's vDSO. unnamed is the row of those in the binary at an address that no
// function's symbol covers.
const (
	outside = "outside the binary (C library, dynamic loader)"
	unnamed = "in the binary, in no function's symbol"
)

// layerCounts sums the instructions of a callgrind file (--dump-instr=yes) by layer: each cost
// line's count goes to the function whose code holds its address. The cost line after calls= is
// the call's inclusive cost, counted where it is spent, so it is passed over.
func layerCounts(file string, syms *symbols) (map[string]int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byFunction := map[string]int64{}
	var summary, total, outsideBinary int64
	var addr uint64
	inBinary, afterCall, sawBinary := false, false, false
	objects := map[string]string{} // "(5)" -> the object's path, named by ob= or cob= alike
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		text := sc.Text()
		switch {
		case text == "" || text[0] == '#':
			continue
		case strings.HasPrefix(text, "summary:"):
			summary = number(strings.TrimSpace(strings.TrimPrefix(text, "summary:")))
			continue
		case strings.HasPrefix(text, "ob=") || strings.HasPrefix(text, "cob="):
			_, ref, _ := strings.Cut(text, "=")
			name := ref
			if strings.HasPrefix(ref, "(") { // compressed: "(5) /path" the first time, "(5)" after
				id, path, _ := strings.Cut(ref, " ")
				if path != "" {
					objects[id] = path
				}
				name = objects[id]
			}
			if text[0] == 'o' {
				inBinary = name == syms.path
				sawBinary = sawBinary || inBinary
			}
			continue
		case strings.HasPrefix(text, "positions:"):
			if strings.Fields(text)[1] != "instr" {
				return nil, fmt.Errorf("%s: %q: want instruction addresses first (--dump-instr=yes)", file, text)
			}
			continue
		case strings.HasPrefix(text, "events:"):
			if f := strings.Fields(text); len(f) < 2 || f[1] != "Ir" {
				return nil, fmt.Errorf("%s: %q: want Ir first", file, text)
			}
			continue
		case strings.HasPrefix(text, "calls="):
			afterCall = true
			continue
		case !(text[0] == '+' || text[0] == '-' || text[0] == '*' || text[0] == '0'):
			continue // fl=, fn=, cob=, cfn=, events: and the other headers
		}
		fields := strings.Fields(text)
		switch p := fields[0]; p[0] {
		case '+', '-':
			n, err := strconv.ParseUint(p[1:], 0, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", file, text, err)
			}
			if p[0] == '+' {
				addr += n
			} else {
				addr -= n
			}
		case '*':
		default:
			n, err := strconv.ParseUint(p, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", file, text, err)
			}
			addr = n
		}
		if afterCall {
			afterCall = false
			continue
		}
		if len(fields) < 3 {
			continue
		}
		n := number(fields[2])
		total += n
		if !inBinary {
			outsideBinary += n
			continue
		}
		byFunction[syms.function(addr)] += n
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if summary == 0 || total != summary {
		return nil, fmt.Errorf("the cost lines add up to %d of the %d instructions callgrind counted", total, summary)
	}
	if !sawBinary {
		return nil, fmt.Errorf("%s: no cost in %s", file, syms.path)
	}
	counts := map[string]int64{outside: outsideBinary}
	for function, n := range byFunction {
		layer := unnamed
		if function != "" {
			if layer = layers.Of(function); layer == "" {
				layer = cmp.Or(layers.RuntimePart(function), utilities)
			}
		}
		counts[layer] += n
	}
	return counts, nil
}

func number(s string) int64 {
	n, _ := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	return n
}

// thousands writes v rounded, with commas: 12,345.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
