package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// make run (batond local) prints the web console's address.
func TestPrintLocalNamesTheConsole(t *testing.T) {
	dir := t.TempDir()
	c, err := cluster.New(cluster.Config{Binary: "batond", Nodes: 3, BaseDir: dir, AdminToken: "tok",
		HTTPPorts: cluster.SequentialPorts(7001, 3), RaftPorts: cluster.SequentialPorts(8001, 3)})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printLocal(&out, c, &localOptions{dir: dir}, 1)
	if want := "web console     http://127.0.0.1:7002/ui/"; !strings.Contains(out.String(), want) {
		t.Errorf("batond local's summary lacks %q:\n%s", want, out.String())
	}
}
