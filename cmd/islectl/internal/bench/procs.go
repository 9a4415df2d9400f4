package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// process is one process whose CPU time and memory a phase reads from /proc.
type process struct {
	Name string // as the report names it: api, worker, rabbitmq, mariadb, redis, bench
	PID  int
}

// cpuTime is the CPU time (user and system, every thread) pid has used.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields are counted
	// after its closing parenthesis, where field 3 (state) comes first.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// memory is a process's resident set now and at its peak, in bytes.
func memory(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch name {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak, nil
}

// findProcesses returns the processes whose command name (/proc/<pid>/comm)
// is one of names, named by what names maps it to. A name with several
// processes (two MariaDB helpers) takes the one that used the most CPU.
func findProcesses(names map[string]string) []process {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	best := map[string]process{}
	used := map[string]time.Duration{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(d + "/comm")
		if err != nil {
			continue
		}
		as, ok := names[strings.TrimSpace(string(comm))]
		if !ok {
			continue
		}
		t, err := cpuTime(pid)
		if err != nil {
			continue
		}
		if _, seen := best[as]; !seen || t > used[as] {
			best[as], used[as] = process{Name: as, PID: pid}, t
		}
	}
	out := make([]process, 0, len(best))
	for _, p := range best {
		out = append(out, p)
	}
	return out
}

// serviceProcesses are the local services' processes: what their CPU time
// per request is read from.
func serviceProcesses() []process {
	return findProcesses(map[string]string{
		"beam.smp": "rabbitmq", "mariadbd": "mariadb", "mysqld": "mariadb", "redis-server": "redis",
	})
}

// resetPeak sets pid's peak resident set (VmHWM) to its resident set now
// (5 written to /proc/PID/clear_refs), so that the peak read at a phase's
// end is the phase's own. The kernel lets a process do it to the processes
// of its own user only: the bench's fleet and itself, not the services.
func resetPeak(pid int) error {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/clear_refs", pid), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("5"))
	return errors.Join(err, f.Close())
}

// cpuMeter reads the CPU time of a set of processes at the start and the
// end of a phase, and their peak memory during it where it could reset it.
type cpuMeter struct {
	procs []process
	start map[int]time.Duration
	reset map[int]bool // the peak was reset at the start
	began time.Time
}

func startCPU(procs []process) *cpuMeter {
	m := &cpuMeter{procs: procs, start: map[int]time.Duration{}, reset: map[int]bool{}, began: time.Now()}
	for _, p := range procs {
		m.reset[p.PID] = resetPeak(p.PID) == nil
		if t, err := cpuTime(p.PID); err == nil {
			m.start[p.PID] = t
		}
	}
	return m
}

// ProcessCPU is what one process used during a phase.
type ProcessCPU struct {
	Process      string  `json:"process"`
	PID          int     `json:"pid"`
	Cores        float64 `json:"cores"`          // CPU seconds per second of the phase
	MsPerRequest float64 `json:"ms_per_request"` // CPU milliseconds per request of the phase
	RSSBytes     int64   `json:"rss_bytes"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// PeakOfPhase says PeakRSSBytes is the peak during the phase; else it
	// is the peak since the process started (resetPeak).
	PeakOfPhase bool `json:"peak_rss_of_phase"`
}

// stop returns each process's CPU during the phase, per request.
func (m *cpuMeter) stop(requests int64) []ProcessCPU {
	wall := time.Since(m.began).Seconds()
	var out []ProcessCPU
	for _, p := range m.procs {
		t0, ok := m.start[p.PID]
		t1, err := cpuTime(p.PID)
		if !ok || err != nil {
			continue
		}
		used := (t1 - t0).Seconds()
		c := ProcessCPU{Process: p.Name, PID: p.PID, Cores: used / wall, PeakOfPhase: m.reset[p.PID]}
		if requests > 0 {
			c.MsPerRequest = used * 1000 / float64(requests)
		}
		c.RSSBytes, c.PeakRSSBytes, _ = memory(p.PID)
		out = append(out, c)
	}
	return out
}
