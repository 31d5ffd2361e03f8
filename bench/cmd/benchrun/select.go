package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"usersd/bench/internal/seeded"
)

// parseScale reads -sizes and -backends. Either one selects the scale scenarios, the other then
// defaulting to 1k or sqlite.
func (r *runner) parseScale(sizes, backends string) error {
	if sizes == "" && backends == "" {
		return nil
	}
	for s := range strings.SplitSeq(cmpOr(sizes, "1k"), ",") {
		n, err := seeded.ParseSize(s)
		if err != nil {
			return fmt.Errorf("-sizes: %w", err)
		}
		if !slices.Contains(r.sizes, n) {
			r.sizes = append(r.sizes, n)
		}
	}
	slices.Sort(r.sizes)
	for name := range strings.SplitSeq(cmpOr(backends, "sqlite"), ",") {
		var b backend
		switch strings.TrimSpace(strings.ToLower(name)) {
		case "sqlite":
			b = sqlite
		case "postgres", "postgresql", "pg":
			b = postgres
		default:
			return fmt.Errorf("-backends: unknown backend %q (sqlite, postgres)", name)
		}
		if !slices.Contains(r.backends, b) { // in the order given: the rounds run them so
			r.backends = append(r.backends, b)
		}
	}
	return nil
}

func cmpOr(s, fallback string) string {
	if strings.TrimSpace(s) == "" {
		return fallback
	}
	return s
}

// scenariosToRun returns the scenarios of this run, in the order each round runs them: those that -only
// names, else the scale scenarios of -sizes and -backends, else the default ones.
func (r *runner) scenariosToRun() ([]scenario, error) {
	var todo []scenario
	switch {
	case r.only != nil:
		// Every scenario -only can name: the protocol ones, and the scale ones at the usual sizes and
		// any that -sizes adds, on both backends.
		known := append(append(protocolScenarios(), shapeScenarios()...), commitScenarios()...)
		sizes := []int{1_000, 1_000_000, 10_000_000}
		for _, n := range r.sizes {
			if !slices.Contains(sizes, n) {
				sizes = append(sizes, n)
			}
		}
		for _, b := range []backend{sqlite, postgres} {
			for _, n := range sizes {
				known = append(known, scaleScenarios(n, b)...)
			}
		}
		for _, sc := range known {
			if r.only[sc.id] && !slices.ContainsFunc(todo, func(t scenario) bool { return t.id == sc.id }) {
				todo = append(todo, sc)
			}
		}
		for id := range r.only {
			if !slices.ContainsFunc(todo, func(t scenario) bool { return t.id == id }) {
				return nil, fmt.Errorf("no scenario %q", id)
			}
		}
	case r.shapes:
		todo = shapeScenarios()
	case r.commits:
		todo = commitScenarios()
	case r.sizes != nil:
		for _, b := range r.backends {
			for _, n := range r.sizes {
				todo = append(todo, scaleScenarios(n, b)...)
			}
		}
	default:
		todo = defaultScenarios(r.million)
	}
	if len(todo) == 0 {
		return nil, errors.New("no scenario to run")
	}
	return todo, nil
}
