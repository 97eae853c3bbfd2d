package aglpython

import (
	"os/exec"
	"path/filepath"
	"strings"
)

// interpreter is the Python the host runs on, as a path to the interpreter
// itself. python3 on PATH may be a version manager's shim (pyenv's is a
// shell script that runs pyenv to pick the interpreter): through it every
// host start cost about half a second more than the interpreter's own
// 0.25 s, and the restart scenarios start a host each, one after another
// on their fixture's restart lane. Asking the interpreter for its own path
// once takes the shim out of every start.
func interpreter() (string, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(exe) {
		return exe, nil
	}
	return py, nil
}

// command is the exec target's command line for aglhost.py at script.
func command(py, script string) string {
	return shellQuote(py) + " " + shellQuote(script)
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
