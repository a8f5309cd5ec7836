package docs_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestNoBinaries: the repository carries no executable, as the README
// promises: a stray `go build` of a package folder writes one at the root
// under the folder's name, and two have been committed that way before.
// It looks at what git tracks (its index), so it needs a git checkout.
func TestNoBinaries(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to look at", err)
	}
	magics := map[string][]byte{
		"ELF":    []byte("\x7fELF"),
		"Mach-O": {0xcf, 0xfa, 0xed, 0xfe},
		"PE":     []byte("MZ"),
	}
	for _, name := range bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
		f, err := os.Open(filepath.Join(root, string(name)))
		if err != nil {
			continue // deleted in the working tree
		}
		head := make([]byte, 4)
		n, _ := io.ReadFull(f, head)
		f.Close()
		for kind, magic := range magics {
			if bytes.HasPrefix(head[:n], magic) {
				t.Errorf("%s is an executable (%s): remove it with git rm --cached and ignore it", name, kind)
			}
		}
	}
}
