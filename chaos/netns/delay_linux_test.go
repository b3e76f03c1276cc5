package netns

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// inNamespace gives its thread back, in the namespace it came from: a
// thread that ended instead would take with it (SIGKILL, Pdeathsig) every
// cluster member it had forked. Before, the thread that opened a delay
// fault's socket ended with its goroutine, and this test failed.
func TestInNamespaceGivesTheThreadBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace (the netns suite's banner says how to run it)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	name := fmt.Sprintf("%s%d-thread", Prefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	target, err := os.Stat("/var/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}

	// Several times: a locked goroutine that ends on the main thread does not
	// end it (the runtime keeps that one), so one try could pass by luck.
	var tids []int
	for range 4 {
		tid := 0
		var inside os.FileInfo
		err = inNamespace(name, func() error {
			tid = syscall.Gettid()
			var err error
			inside, err = os.Stat(fmt.Sprintf("/proc/self/task/%d/ns/net", tid))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(inside, target) {
			t.Fatalf("fn ran in namespace %v, want %s's", inside.Sys(), name)
		}
		tids = append(tids, tid)
	}
	// A locked thread ends right after its goroutine; give it time to.
	time.Sleep(200 * time.Millisecond)
	home, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		task := fmt.Sprintf("/proc/self/task/%d", tid)
		now, err := os.Stat(task + "/ns/net")
		if err != nil {
			t.Fatalf("thread %d ended after running in %s: %v", tid, name, err)
		}
		if !os.SameFile(now, home) {
			t.Fatalf("thread %d was given back in another namespace than the process's", tid)
		}
	}
}
