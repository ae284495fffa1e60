package redistest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewSentinelWithoutRedisSentinelNamesThePackage(t *testing.T) {
	// PATH holds redis-server alone.
	dir := t.TempDir()
	server, err := exec.LookPath(Binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(server, filepath.Join(dir, Binary)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	_, err = NewSentinel()
	if err == nil {
		t.Fatal("NewSentinel without redis-sentinel on PATH succeeded; want an error")
	}
	for _, want := range []string{"redis-sentinel is not on PATH", "apt-get install redis-sentinel"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
