package cli_test

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A one-node Slurm cluster of this machine for a test: munged,
// slurmctld and slurmd (Debian's munge, slurmctld, slurmd and
// slurm-client), every file of theirs in the test's directory, on ports
// free when it starts; stopped when the test ends, passed or failed.

// slurmCluster is a running one-node cluster.
type slurmCluster struct {
	dir, conf string
	env       []string
}

// slurmTools are the programs a cluster needs.
var slurmTools = []string{"munged", "slurmctld", "slurmd", "srun", "sbatch", "scancel", "scontrol", "sinfo", "squeue"}

// needSlurm skips where the cluster cannot run: not root, or Slurm not
// installed (a failure instead where HEADROOM_REQUIRE_SLURM is set, as
// scripts/test.sh does after installing it).
func needSlurm(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a one-node Slurm runs its daemons as root (SlurmUser=root): run the tests as root")
	}
	for _, c := range slurmTools {
		if _, err := exec.LookPath(c); err != nil {
			if _, err := exec.LookPath("/usr/sbin/" + c); err == nil {
				continue
			}
			msg := fmt.Sprintf("%s not found: install Debian's slurmctld slurmd slurm-client munge (scripts/test.sh does)", c)
			if os.Getenv("HEADROOM_REQUIRE_SLURM") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// sbin returns the path of a daemon (in /usr/sbin, often not on PATH).
func sbin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return "/usr/sbin/" + name
}

// freePorts returns n TCP ports free at the moment.
func freePorts(t *testing.T, n int) []int {
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// startSlurm writes a munge key and a slurm.conf for this machine (its
// node line is slurmd -C's: the cores it finds) and starts the daemons.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	dir := t.TempDir()
	c := &slurmCluster{dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	c.env = append(os.Environ(), "SLURM_CONF="+c.conf, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	for _, d := range []string{"munge", "state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o755) // munge's clients reach its socket through it
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "munge", "key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "munge", "sock")
	t.Cleanup(func() { c.stop(t) })
	c.daemon(t, sbin("munged"), "--force", "--socket="+sock, "--key-file="+filepath.Join(dir, "munge", "key"),
		"--log-file="+filepath.Join(dir, "munge", "log"), "--pid-file="+filepath.Join(dir, "munge", "pid"), "--seed-file="+filepath.Join(dir, "munge", "seed"))

	out, err := exec.Command(sbin("slurmd"), "-C").Output()
	if err != nil {
		t.Fatalf("slurmd -C: %v", err)
	}
	node := strings.SplitN(string(out), "\n", 2)[0] // NodeName=... CPUs=... RealMemory=...
	node = regexp.MustCompile(` RealMemory=\d+`).ReplaceAllString(node, "")
	name := strings.TrimPrefix(strings.Fields(node)[0], "NodeName=")
	ports := freePorts(t, 2)
	conf := fmt.Sprintf(`# one node of this machine, for headroom's tests
ClusterName=headroom
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[4]s
CredType=cred/munge
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/slurmctld.log
SlurmdLogFile=%[5]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PlugStackConfig=/dev/null
%[6]s NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
`, name, ports[0], ports[1], sock, dir, node)
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c.daemon(t, sbin("slurmctld"), "-i")
	c.daemon(t, sbin("slurmd"))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out, _ := c.cmd("sinfo", "-h", "-o", "%T").CombinedOutput()
		if strings.TrimSpace(string(out)) == "idle" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never became idle: sinfo says %q\n%s", out, c.logs())
		}
	}
	return c
}

// cmd is a Slurm command (or any) run against the cluster.
func (c *slurmCluster) cmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = c.env
	return cmd
}

// daemon starts a daemon (each forks into the background).
func (c *slurmCluster) daemon(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := c.cmd(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s\n%s", name, err, out, c.logs())
	}
}

// logs returns the daemons' logs.
func (c *slurmCluster) logs() string {
	var b strings.Builder
	for _, f := range []string{"munge/log", "slurmctld.log", "slurmd.log"} {
		data, _ := os.ReadFile(filepath.Join(c.dir, f))
		fmt.Fprintf(&b, "--- %s:\n%s", f, data)
	}
	return b.String()
}

// stop cancels every job and ends the daemons this cluster started (by
// their pid files), waiting until they are gone.
func (c *slurmCluster) stop(t *testing.T) {
	c.cmd("scancel", "--user=root").Run()
	for i := 0; i < 100; i++ { // the jobs' processes end before slurmd
		if out, err := c.cmd("squeue", "-h").Output(); err != nil || len(strings.TrimSpace(string(out))) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, f := range []string{"slurmd.pid", "slurmctld.pid", "munge/pid"} {
		data, err := os.ReadFile(filepath.Join(c.dir, f))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 1 {
			continue
		}
		syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s (pid %d) did not stop on SIGTERM", f, pid)
		}
	}
}

// jobField returns a field of scontrol show job (JobState, Restarts).
func (c *slurmCluster) jobField(id, field string) string {
	out, _ := c.cmd("scontrol", "show", "job", id).Output()
	m := regexp.MustCompile(`\b` + field + `=(\S+)`).FindSubmatch(out)
	if m == nil {
		return ""
	}
	return string(m[1])
}
