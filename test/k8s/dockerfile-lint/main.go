// Command dockerfile-lint checks a Dockerfile with BuildKit's own linter (the rules `docker
// build --check` applies while parsing: instruction and stage-name casing, deprecated and
// duplicate instructions, legacy ENV/LABEL syntax, undefined ARGs in FROM, relative WORKDIR…).
// It prints one line per warning (`file:line Rule: message`) and exits 1 when there is any,
// 2 when the file cannot be read or parsed, 0 otherwise.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dockerfile-lint <Dockerfile>")
		os.Exit(2)
	}
	file := os.Args[1]
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
		os.Exit(2)
	}
	warnings := 0
	for _, w := range res.Warnings {
		warnings++
		fmt.Printf("%s:%d %s\n", file, w.Location.Start.Line, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		warnings++
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		fmt.Printf("%s:%d %s: %s\n", file, line, rule, msg)
	}})
	if _, _, err := instructions.Parse(res.AST, lint); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
		os.Exit(2)
	}
	if warnings > 0 {
		os.Exit(1)
	}
}
