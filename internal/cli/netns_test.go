package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A two-host network on one machine: two network namespaces joined by a
// veth pair, 10.231.7.1 in the first and 10.231.7.2 in the second (private
// addresses that exist only inside them). Everything is named after this
// test process's pid (hrnet<pid>a, hrnet<pid>b; the veth ends hrv<pid>a,
// hrv<pid>b), so that a later run can tell a stale pair from a live one.

const (
	netnsPrefix = "hrnet"
	netAddrA    = "10.231.7.1"
	netAddrB    = "10.231.7.2"
	netMask     = "30"
	netSubnet   = "10.231.7.0/30"
)

// netPair is the two namespaces and the ends of their link.
type netPair struct {
	ns, dev [2]string
	agent   string // the rsh agent that "logs in" to an address
}

// needNetns skips the test where namespaces cannot be made: not root, or
// no ip or unshare.
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); run the tests as root")
	}
	for _, c := range []string{"ip", "unshare", "hostname"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not found: the network-namespace test needs iproute2 and util-linux", c)
		}
	}
}

// sh runs a command and fails the test with its output if it fails.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// removeStaleNetns deletes the namespaces a run of this test left (its
// process is gone), ending whatever still runs in them.
func removeStaleNetns(t *testing.T) {
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, netnsPrefix)
		if !ok || len(rest) < 2 {
			continue
		}
		pid, err := strconv.Atoi(rest[:len(rest)-1])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its test still runs
		}
		t.Logf("removing stale namespace %s (process %d is gone)", name, pid)
		deleteNetns(name)
	}
}

// deleteNetns kills the processes inside namespace name and deletes it
// (with its end of the veth pair, which takes the other end along).
func deleteNetns(name string) {
	for range 20 {
		out, _ := exec.Command("ip", "netns", "pids", name).Output()
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	exec.Command("ip", "netns", "del", name).Run()
}

// newNetPair makes the two namespaces and their link, and deletes them
// when the test ends, passed or failed.
func newNetPair(t *testing.T) *netPair {
	t.Helper()
	removeStaleNetns(t)
	pid := os.Getpid()
	p := &netPair{}
	for i, c := range []byte{'a', 'b'} {
		p.ns[i] = fmt.Sprintf("%s%d%c", netnsPrefix, pid, c)
		p.dev[i] = fmt.Sprintf("hrv%d%c", pid, c)
	}
	for i := range p.ns {
		deleteNetns(p.ns[i]) // one this process left, if any
		if out, err := exec.Command("ip", "netns", "add", p.ns[i]).CombinedOutput(); err != nil {
			t.Skipf("ip netns add: %v (%s): this machine does not allow network namespaces", err, strings.TrimSpace(string(out)))
		}
		ns := p.ns[i]
		t.Cleanup(func() {
			deleteNetns(ns)
			if _, err := os.Stat("/var/run/netns/" + ns); err == nil {
				t.Errorf("namespace %s is still there", ns)
			}
		})
	}
	sh(t, "ip", "link", "add", p.dev[0], "type", "veth", "peer", "name", p.dev[1])
	for i, addr := range []string{netAddrA, netAddrB} {
		sh(t, "ip", "link", "set", p.dev[i], "netns", p.ns[i])
		sh(t, "ip", "-n", p.ns[i], "addr", "add", addr+"/"+netMask, "dev", p.dev[i])
		sh(t, "ip", "-n", p.ns[i], "link", "set", "lo", "up")
		sh(t, "ip", "-n", p.ns[i], "link", "set", p.dev[i], "up")
	}
	p.agent = filepath.Join(t.TempDir(), "nsagent")
	script := fmt.Sprintf(`#!/bin/sh
# an rsh agent for mpirun: runs the command in the namespace holding the
# address, as a host of its own (its own hostname)
host=$1; shift
case $host in
%s) ns=%s;;
%s) ns=%s;;
*) echo "nsagent: no namespace holds $host" >&2; exit 255;;
esac
exec ip netns exec "$ns" unshare --uts sh -c "hostname node-$ns; $*"
`, netAddrA, p.ns[0], netAddrB, p.ns[1])
	if err := os.WriteFile(p.agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// txBytes returns the bytes namespace i has sent over its end of the link.
func (p *netPair) txBytes(t *testing.T, i int) int64 {
	t.Helper()
	out := sh(t, "ip", "netns", "exec", p.ns[i], "cat", "/sys/class/net/"+p.dev[i]+"/statistics/tx_bytes")
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mpirun returns the command that runs bin with args as rank 0 in the
// first namespace and rank 1 in the second, Open MPI over TCP between
// them: mpirun runs in the first namespace (a host named node-<ns>) and
// starts the second rank's daemon through the agent. Each rank's stderr
// goes to logs.<rank>. The daemons' TCP keepalive probes a silent peer
// after 1 s, so a lost link ends the job within seconds.
func (p *netPair) mpirun(mpirun, logs, bin string, args ...string) *exec.Cmd {
	mpiArgs := []string{mpirun,
		"--mca", "plm_rsh_agent", p.agent,
		"--mca", "btl", "tcp,self",
		"--mca", "btl_tcp_if_include", netSubnet,
		"--mca", "oob_tcp_if_include", netSubnet,
		"--mca", "oob_tcp_keepalive_time", "1",
		"--mca", "oob_tcp_keepalive_intvl", "1",
		"--mca", "oob_tcp_keepalive_probes", "3",
		"--host", netAddrA + "," + netAddrB, "-np", "2", "--bind-to", "none",
		"sh", "-c", `exec "$0" "$@" 2>"` + logs + `.$OMPI_COMM_WORLD_RANK"`, bin}
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.ns[0], "unshare", "--uts", "sh", "-c",
		`hostname node-` + p.ns[0] + `; exec "$@"`, "sh"}, append(mpiArgs, args...)...)...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	return cmd
}

// shape limits both ends of the link: netem's delay and rate where the
// kernel has netem, else tbf's rate alone. It returns what it set.
func (p *netPair) shape(t *testing.T, delay, rate string) string {
	t.Helper()
	what := "netem delay " + delay + " rate " + rate
	for i := range p.ns {
		out, err := exec.Command("tc", "-n", p.ns[i], "qdisc", "replace", "dev", p.dev[i], "root", "netem", "delay", delay, "rate", rate).CombinedOutput()
		if err == nil {
			continue
		}
		if !strings.Contains(string(out), "unknown") {
			t.Fatalf("tc netem: %v\n%s", err, out)
		}
		// this kernel was built without sch_netem: no added delay
		what = "tbf rate " + rate + " (this kernel has no netem: no added delay)"
		sh(t, "tc", "-n", p.ns[i], "qdisc", "replace", "dev", p.dev[i], "root", "tbf", "rate", rate, "burst", "256kb", "latency", "100ms")
	}
	return what
}
