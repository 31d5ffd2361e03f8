// Package web holds the browser page that usersd serves at the URL root.
package web

import (
	"embed"
	"io/fs"
)

//go:embed public
var files embed.FS

// Public is the folder served at "/": what is in web/public, compiled into the binary.
var Public, _ = fs.Sub(files, "public") // "public" is embedded above, so Sub cannot fail
