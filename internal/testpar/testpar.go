// Package testpar lets a test package whose tests mostly wait on hosts run
// more of its parallel tests at once than go test's default (-parallel
// defaults to GOMAXPROCS: 2 here, so a package of ten tests that each wait
// a minute on hosts took five minutes while the cores idled).
package testpar

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// Main runs the package's tests with n parallel tests at once unless the
// command line sets -test.parallel itself (that always wins; n 0 leaves go
// test's default), then runs after (cleanups of what the tests shared, such
// as scratch.OnTmpfs's) and exits.
func Main(m *testing.M, n int, after ...func()) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && n > 0 {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}
