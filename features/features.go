// Package features embeds the Gherkin corpus, one directory per spec family
// and one file per spec section. The corpus is part of the suite's identity:
// evidence bundles carry its digest and verification refuses another.
package features

import "embed"

// FS holds every feature file, as <family>/<section>.feature.
//
//go:embed */*.feature
var FS embed.FS
