package main

// A pod's life on this "node", as the kubelet lives it: set up the sandbox (network, volumes,
// hosts file, DNS settings), start the containers, report Running, restart containers as
// restartPolicy says, report each exit as the container's terminated state and the pod's phase,
// and on deletion stop the containers (SIGTERM, SIGKILL after the grace period) before the
// final delete with grace 0 that lets the object go.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

const (
	logTimeFormat         = "2006-01-02T15:04:05.000000000Z07:00" // what containerd writes
	maxTerminationMessage = 4096
	restartBackoff        = time.Second
)

// What a container is to the pod: an app container, an init container run to completion before
// the next, or a native sidecar (an init container with restartPolicy Always: started in its
// turn, kept running beside the app containers, stopped after they end).
type containerKind int

const (
	kindApp containerKind = iota
	kindInit
	kindSidecar
)

type containerRun struct {
	name      string
	kind      containerKind
	spec      *corev1.Container
	restarts  int
	id        string
	running   bool
	started   bool // ran at least once
	startedAt time.Time
	pid       int
	state     *corev1.ContainerStateTerminated // the last exit, nil while none
	last      *corev1.ContainerStateTerminated // the exit before it
	done      bool                             // it will not run again
	waiting   string                           // reason while it does not run yet
	waitMsg   string
}

func (c *containerRun) logPath(dir string, restart int) string {
	return filepath.Join(dir, "containers", c.name, fmt.Sprintf("%d.log", restart))
}

type exitEvent struct {
	c    *containerRun
	term *corev1.ContainerStateTerminated
}

type podWorker struct {
	r       *runner
	uid     types.UID
	ns      string
	name    string
	dir     string
	updates chan *corev1.Pod
	gone    chan struct{}
	goneOne sync.Once

	mu          sync.Mutex // guards ctrs' fields read by the log server, pod and the flags below
	pod         *corev1.Pod
	ctrs        []*containerRun // init containers (and sidecars) in order, then app containers
	initialized bool            // every init container completed and every sidecar started
	initFailed  bool            // an init container failed under restartPolicy Never: the pod failed
	ip          net.IP
	netns       netns.NsHandle
	start       time.Time
}

func newPodWorker(r *runner, pod *corev1.Pod) *podWorker {
	w := &podWorker{r: r, uid: pod.UID, ns: pod.Namespace, name: pod.Name, pod: pod, netns: -1,
		dir:     filepath.Join(r.dir, "pods", pod.Namespace, pod.Name),
		updates: make(chan *corev1.Pod, 1), gone: make(chan struct{})}
	// init containers first, in their order: the order they start in
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		kind := kindInit
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = kindSidecar
		}
		w.ctrs = append(w.ctrs, &containerRun{name: c.Name, kind: kind, spec: c, waiting: "PodInitializing"})
	}
	waiting := "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		waiting = "PodInitializing"
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		w.ctrs = append(w.ctrs, &containerRun{name: c.Name, spec: c, waiting: waiting})
	}
	return w
}

// notify hands the newest version of the pod to the worker; an older one not yet read is dropped.
func (w *podWorker) notify(p *corev1.Pod) {
	for {
		select {
		case w.updates <- p:
			return
		default:
			select {
			case <-w.updates:
			default:
			}
		}
	}
}

func (w *podWorker) markGone() { w.goneOne.Do(func() { close(w.gone) }) }

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (w *podWorker) logf(format string, a ...any) {
	klog.InfoS(fmt.Sprintf(format, a...), "pod", klog.KRef(w.ns, w.name))
}

func (w *podWorker) run(pod *corev1.Pod) {
	defer w.r.forget(w)
	if isTerminal(pod) {
		w.awaitDeletion(pod)
		return
	}
	if err := os.RemoveAll(w.dir); err != nil {
		w.logf("cannot clean %s: %v", w.dir, err)
	}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		w.logf("cannot make %s: %v", w.dir, err)
		return
	}
	w.start = time.Now()
	if len(pod.Spec.EphemeralContainers) > 0 {
		// said, not pretended: the pod stays waiting, as on a node that cannot run it
		w.r.event(pod, corev1.EventTypeWarning, "Unsupported",
			"the test cluster's pod runner does not run ephemeral containers")
		w.awaitDeletion(pod)
		return
	}
	var specs map[string]*initSpec
	for {
		var err error
		if specs, err = w.setup(pod); err == nil {
			break
		}
		w.logf("sandbox: %v", err)
		w.r.event(pod, corev1.EventTypeWarning, "FailedMount", err.Error())
		w.teardown()
		select {
		case p := <-w.updates:
			pod = p
		case <-time.After(2 * time.Second):
		case <-w.gone:
			return
		case <-w.r.stop:
			return
		}
		if pod.DeletionTimestamp != nil {
			w.finalDelete(pod)
			return
		}
	}
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	pod = w.runContainers(pod, specs)
	w.teardown()
	if pod != nil {
		w.awaitDeletion(pod)
	}
}

// runContainers runs until every container is done or the pod goes; it returns the newest pod,
// nil when the pod is gone or the runner stops.
func (w *podWorker) runContainers(pod *corev1.Pod, specs map[string]*initSpec) *corev1.Pod {
	exits := make(chan exitEvent, len(w.ctrs))
	live := 0
	next := 0 // the next container of w.ctrs to start while the pod initializes
	killing := false
	// advance starts containers in order as a kubelet does: a sidecar and the next after it, an
	// init container and then nothing until it completes, the app containers all together once
	// every init container has completed.
	advance := func() {
		for !killing && next < len(w.ctrs) {
			c := w.ctrs[next]
			if c.kind == kindApp {
				w.mu.Lock()
				w.initialized = true
				w.mu.Unlock()
				for _, a := range w.ctrs[next:] {
					if w.startContainer(pod, a, specs[a.name], exits) {
						live++
					}
				}
				next = len(w.ctrs)
				return
			}
			next++
			if !w.startContainer(pod, c, specs[c.name], exits) {
				// a container that cannot start fails the pod's initialization for good
				w.failInit()
				return
			}
			live++
			if c.kind == kindInit {
				return
			}
		}
	}
	advance()
	w.updateStatus()
	var killTimer <-chan time.Time
	stoppingSidecars := false
	kill := func(sig syscall.Signal) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, c := range w.ctrs {
			if c.running && c.pid > 0 {
				_ = syscall.Kill(-c.pid, sig)
			}
		}
	}
	startKilling := func(p *corev1.Pod) {
		if killing {
			return
		}
		killing = true
		grace := int64(30)
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		for _, c := range w.ctrs {
			if c.running {
				w.r.event(p, corev1.EventTypeNormal, "Killing", fmt.Sprintf("Stopping container %s", c.name))
			}
		}
		kill(syscall.SIGTERM)
		killTimer = time.After(time.Duration(grace) * time.Second)
	}
	restarts := make(chan *containerRun, len(w.ctrs))
	// stopSidecars ends the sidecars once every app container is done: SIGTERM, as in a pod's
	// deletion, their exits not restarted and not counted in the pod's phase
	stopSidecars := func() {
		if stoppingSidecars || !w.appsDone() {
			return
		}
		stoppingSidecars = true
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, c := range w.ctrs {
			if c.kind == kindSidecar && c.running && c.pid > 0 {
				_ = syscall.Kill(-c.pid, syscall.SIGTERM)
			}
		}
		// one that ignores SIGTERM is killed after the pod's grace period, as in a deletion
		grace := int64(30)
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *pod.Spec.TerminationGracePeriodSeconds
		}
		if killTimer == nil {
			killTimer = time.After(time.Duration(grace) * time.Second)
		}
	}
	for live > 0 {
		select {
		case p := <-w.updates:
			pod = p
			w.mu.Lock()
			w.pod = p
			w.mu.Unlock()
			if p.DeletionTimestamp != nil {
				startKilling(p)
			}
		case ev := <-exits:
			live--
			w.mu.Lock()
			c := ev.c
			c.running = false
			c.last, c.state = c.state, ev.term
			policy := pod.Spec.RestartPolicy
			var again bool
			switch c.kind {
			case kindSidecar: // restarted whatever the pod's policy, until the app containers end
				again = !killing && !stoppingSidecars
			case kindInit: // restarted on failure unless the pod's policy is Never
				again = !killing && ev.term.ExitCode != 0 && policy != corev1.RestartPolicyNever
			default:
				again = !killing && (policy == corev1.RestartPolicyAlways ||
					(policy == corev1.RestartPolicyOnFailure && ev.term.ExitCode != 0))
			}
			if again {
				c.restarts++
				c.waiting = "CrashLoopBackOff"
				live++
			} else {
				c.done = true
			}
			w.mu.Unlock()
			w.logf("container %s exited with code %d", c.name, ev.term.ExitCode)
			if again {
				go func() { time.Sleep(restartBackoff); restarts <- c }()
			} else if c.kind == kindInit && ev.term.ExitCode == 0 {
				advance()
			} else if c.kind == kindInit {
				w.failInit()
				stoppingSidecars = true
				kill(syscall.SIGTERM)
			}
			stopSidecars()
			w.updateStatus()
		case c := <-restarts:
			if killing {
				w.mu.Lock()
				c.done = true
				w.mu.Unlock()
				live--
				continue
			}
			if !w.startContainer(pod, c, specs[c.name], exits) {
				live--
				if c.kind != kindApp && !w.isInitialized() {
					w.failInit()
				}
			}
			stopSidecars()
			w.updateStatus()
		case <-killTimer:
			kill(syscall.SIGKILL)
		case <-w.gone:
			kill(syscall.SIGKILL)
			w.drain(exits, live)
			return nil
		case <-w.r.stop:
			kill(syscall.SIGKILL)
			w.drain(exits, live)
			return nil
		}
	}
	return pod
}

// failInit marks the pod failed in its initialization: the app containers never start.
func (w *podWorker) failInit() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.initFailed = true
	for _, c := range w.ctrs {
		if c.kind == kindApp {
			c.done = true
		}
	}
}

func (w *podWorker) isInitialized() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.initialized
}

// appsDone: every app container has run and will not run again
func (w *podWorker) appsDone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.initialized {
		return false
	}
	for _, c := range w.ctrs {
		if c.kind == kindApp && !c.done {
			return false
		}
	}
	return true
}

func (w *podWorker) drain(exits chan exitEvent, live int) {
	for ; live > 0; live-- {
		select {
		case <-exits:
		case <-time.After(10 * time.Second):
			return
		}
	}
}

// awaitDeletion waits for the pod's deletion and then lets the object go.
func (w *podWorker) awaitDeletion(pod *corev1.Pod) {
	for pod.DeletionTimestamp == nil {
		select {
		case p := <-w.updates:
			pod = p
		case <-w.gone:
			return
		case <-w.r.stop:
			return
		}
	}
	w.finalDelete(pod)
}

func (w *podWorker) finalDelete(pod *corev1.Pod) {
	zero := int64(0)
	err := w.r.cs.CoreV1().Pods(w.ns).Delete(context.Background(), w.name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &w.uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.logf("final delete: %v", err)
	}
}

func (w *podWorker) teardown() {
	if w.ip != nil {
		w.r.net.unplug(w.netns, w.ip)
		w.ip = nil
		w.netns = -1
	}
}

// setup makes the sandbox: network, volumes, hosts, resolv.conf, and each container's spec.
func (w *podWorker) setup(pod *corev1.Pod) (map[string]*initSpec, error) {
	ctx := context.Background()
	if w.ip == nil {
		ns, ip, err := w.r.net.addPod()
		if err != nil {
			return nil, fmt.Errorf("pod network: %w", err)
		}
		w.netns, w.ip = ns, ip
	}
	// the downward API and the endpoint controller see the pod's IP from here on
	if err := w.setStatusIPs(); err != nil {
		return nil, err
	}
	if p, err := w.r.cs.CoreV1().Pods(w.ns).Get(ctx, w.name, metav1.GetOptions{}); err == nil && p.UID == w.uid {
		pod = p
	}
	vm := &volumeMaker{ctx: ctx, cs: w.r.cs, pod: pod}
	vols := map[string]volume{}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		vol, err := vm.make(v, filepath.Join(w.dir, "volumes", v.Name))
		if err != nil {
			return nil, fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", v.Name, err)
		}
		vols[v.Name] = vol
	}
	hostname := pod.Spec.Hostname
	if hostname == "" {
		hostname = pod.Name
	}
	if len(hostname) > 63 {
		hostname = strings.TrimRight(hostname[:63], "-.")
	}
	etc := filepath.Join(w.dir, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return nil, err
	}
	hosts := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	if pod.Spec.Subdomain != "" {
		hosts += fmt.Sprintf("%s\t%s.%s.%s.svc.%s\t%s\n", w.ip, hostname, pod.Spec.Subdomain, pod.Namespace, w.r.zone, hostname)
	} else {
		hosts += fmt.Sprintf("%s\t%s\n", w.ip, hostname)
	}
	for _, ha := range pod.Spec.HostAliases {
		hosts += fmt.Sprintf("%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
	}
	var resolv string
	switch pod.Spec.DNSPolicy {
	case corev1.DNSDefault:
		b, _ := os.ReadFile("/etc/resolv.conf")
		resolv = string(b)
	case corev1.DNSNone:
		if dc := pod.Spec.DNSConfig; dc != nil {
			for _, s := range dc.Nameservers {
				resolv += "nameserver " + s + "\n"
			}
			if len(dc.Searches) > 0 {
				resolv += "search " + strings.Join(dc.Searches, " ") + "\n"
			}
		}
	default: // ClusterFirst
		resolv = fmt.Sprintf("search %s.svc.%s svc.%s %s\nnameserver %s\noptions ndots:5\n",
			pod.Namespace, w.r.zone, w.r.zone, w.r.zone, w.r.dnsIP)
	}
	for name, content := range map[string]string{"hosts": hosts, "hostname": hostname + "\n", "resolv.conf": resolv} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	services, err := w.r.services.List(everything)
	if err != nil {
		return nil, err
	}
	specs := map[string]*initSpec{}
	for _, c := range w.ctrs {
		env, err := containerEnv(ctx, w.r.cs, pod, c.spec, services, hostname)
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", c.name, err)
		}
		cdir := filepath.Join(w.dir, "containers", c.name)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			return nil, err
		}
		s := &initSpec{RuntimeDir: filepath.Join(cdir, "rt"), Hostname: hostname, WorkDir: c.spec.WorkingDir,
			Argv: containerArgv(c.spec, env), Env: env}
		s.Mounts = append(s.Mounts,
			mountSpec{Source: filepath.Join(etc, "hosts"), Target: "/etc/hosts"},
			mountSpec{Source: filepath.Join(etc, "hostname"), Target: "/etc/hostname"},
			mountSpec{Source: filepath.Join(etc, "resolv.conf"), Target: "/etc/resolv.conf"},
			// the "image": the host's root file system with dlk installed
			mountSpec{Source: w.r.dlk, Target: "/usr/local/bin/dlk", ReadOnly: true})
		s.Mounts = append(s.Mounts, w.r.extra...)
		for _, vm := range c.spec.VolumeMounts {
			vol, ok := vols[vm.Name]
			if !ok {
				return nil, fmt.Errorf("container %s: no volume %q", c.name, vm.Name)
			}
			m := mountSpec{Target: vm.MountPath, ReadOnly: vm.ReadOnly || vol.readOnly}
			if vol.tmpfs {
				if vm.SubPath != "" {
					return nil, fmt.Errorf("container %s: subPath of a memory volume is not supported here", c.name)
				}
				m.Tmpfs, m.Size = true, vol.size
			} else {
				m.Source = vol.path
				if vm.SubPath != "" {
					m.Source = filepath.Join(vol.path, filepath.Clean("/"+vm.SubPath))
					if err := os.MkdirAll(m.Source, 0o755); err != nil {
						return nil, err
					}
				}
			}
			s.Mounts = append(s.Mounts, m)
		}
		specs[c.name] = s
	}
	return specs, nil
}

// startContainer starts c's next run; false when it could not start (its state says why).
func (w *podWorker) startContainer(pod *corev1.Pod, c *containerRun, s *initSpec, exits chan<- exitEvent) bool {
	cdir := filepath.Join(w.dir, "containers", c.name)
	tlog := filepath.Join(cdir, fmt.Sprintf("termination-log.%d", c.restarts))
	if err := os.WriteFile(tlog, nil, 0o666); err != nil {
		return w.startFailed(pod, c, err.Error())
	}
	spec := *s
	tpath := c.spec.TerminationMessagePath
	if tpath == "" {
		tpath = corev1.TerminationMessagePathDefault
	}
	spec.Mounts = append(append([]mountSpec{}, s.Mounts...), mountSpec{Source: tlog, Target: tpath})
	spec.RuntimeDir = fmt.Sprintf("%s.%d", s.RuntimeDir, c.restarts)
	b, _ := json.Marshal(&spec)
	specPath := filepath.Join(cdir, fmt.Sprintf("init.%d.json", c.restarts))
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return w.startFailed(pod, c, err.Error())
	}
	logFile, err := os.OpenFile(c.logPath(w.dir, c.restarts), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return w.startFailed(pod, c, err.Error())
	}
	lw := &logWriter{f: logFile}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	stR, stW, _ := os.Pipe()
	// the child gets its own descriptor of the namespace: w.netns stays ours
	nsFd, err := syscall.Dup(int(w.netns))
	if err != nil {
		logFile.Close()
		return w.startFailed(pod, c, err.Error())
	}
	nsFile := os.NewFile(uintptr(nsFd), "netns")
	cmd := exec.Command(w.r.self, "pod-init", specPath)
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{nsFile, stW}
	cmd.Env = []string{"PATH=" + defaultPath}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	err = cmd.Start()
	nsFile.Close()
	outW.Close()
	errW.Close()
	stW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		stR.Close()
		logFile.Close()
		return w.startFailed(pod, c, err.Error())
	}
	msg, _ := io.ReadAll(stR)
	stR.Close()
	var copiers sync.WaitGroup
	copiers.Add(2)
	go func() { copyLog(outR, "stdout", lw); copiers.Done() }()
	go func() { copyLog(errR, "stderr", lw); copiers.Done() }()
	if len(msg) > 0 {
		// the command never started: what a runtime reports as StartError, exit 128
		_ = cmd.Wait()
		copiers.Wait()
		logFile.Close()
		return w.startFailed(pod, c, string(msg))
	}
	now := time.Now()
	w.mu.Lock()
	c.id = fmt.Sprintf("podrunner://%s-%s-%d", w.uid, c.name, c.restarts)
	c.running, c.started, c.startedAt, c.pid, c.waiting = true, true, now, cmd.Process.Pid, ""
	w.mu.Unlock()
	if err := os.WriteFile(filepath.Join(cdir, "pid"), []byte(fmt.Sprintf("%d\n", cmd.Process.Pid)), 0o644); err != nil {
		w.logf("pid file: %v", err)
	}
	w.r.event(pod, corev1.EventTypeNormal, "Started", fmt.Sprintf("Started container %s", c.name))
	w.logf("container %s started: pid %d: %s", c.name, cmd.Process.Pid, strings.Join(s.Argv, " "))
	go func() {
		werr := cmd.Wait()
		copiers.Wait()
		logFile.Close()
		code := 0
		if ps := cmd.ProcessState; ps != nil {
			if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			} else {
				code = ps.ExitCode()
			}
		} else if werr != nil {
			code = 1
		}
		term := &corev1.ContainerStateTerminated{ExitCode: int32(code), StartedAt: metav1.NewTime(now),
			FinishedAt: metav1.Now(), ContainerID: c.id, Reason: "Completed"}
		if code != 0 {
			term.Reason = "Error"
		}
		term.Message = terminationMessage(tlog, c.spec, code, c.logPath(w.dir, c.restarts))
		exits <- exitEvent{c, term}
	}()
	return true
}

func (w *podWorker) startFailed(pod *corev1.Pod, c *containerRun, msg string) bool {
	msg = strings.TrimSpace(msg)
	w.logf("container %s did not start: %s", c.name, msg)
	w.r.event(pod, corev1.EventTypeWarning, "Failed", "Error: "+msg)
	now := metav1.Now()
	w.mu.Lock()
	c.last = c.state
	c.state = &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: msg, StartedAt: now, FinishedAt: now}
	c.done, c.running, c.waiting = true, false, ""
	w.mu.Unlock()
	return false
}

func terminationMessage(path string, c *corev1.Container, code int, logPath string) string {
	b, _ := os.ReadFile(path)
	if len(b) > maxTerminationMessage {
		b = b[:maxTerminationMessage]
	}
	if len(b) == 0 && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		b = logTail(logPath, 80, 2048)
	}
	return string(b)
}

// logTail is the last lines of a CRI log file's content, at most max bytes.
func logTail(path string, lines, max int) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) == 4 {
			out = append(out, parts[3])
		}
		if len(out) > lines {
			out = out[1:]
		}
	}
	s := strings.Join(out, "\n")
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return []byte(s)
}

type logWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (l *logWriter) write(stream, tag string, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := make([]byte, 0, len(line)+48)
	b = append(b, time.Now().UTC().Format(logTimeFormat)...)
	b = append(b, ' ')
	b = append(b, stream...)
	b = append(b, ' ')
	b = append(b, tag...)
	b = append(b, ' ')
	b = append(b, line...)
	b = append(b, '\n')
	_, _ = l.f.Write(b)
}

// copyLog writes what the container prints as CRI log lines: one "F" line per line, "P" for
// the pieces of a line longer than 16 KiB (containerd's limit).
func copyLog(r io.ReadCloser, stream string, lw *logWriter) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 16*1024)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			tag := "F"
			if line[len(line)-1] == '\n' {
				line = line[:len(line)-1]
			} else if errors.Is(err, bufio.ErrBufferFull) {
				tag = "P"
			}
			lw.write(stream, tag, line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// ---- status ----

func (w *podWorker) setStatusIPs() error {
	return w.patchStatus(func(st *corev1.PodStatus) {
		st.HostIP = w.r.nodeIP
		st.HostIPs = []corev1.HostIP{{IP: w.r.nodeIP}}
		st.PodIP = w.ip.String()
		st.PodIPs = []corev1.PodIP{{IP: w.ip.String()}}
		if st.StartTime == nil {
			t := metav1.NewTime(w.start)
			st.StartTime = &t
		}
		setCondition(st, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "")
		w.mu.Lock()
		defer w.mu.Unlock()
		w.setInitialized(st)
		for _, c := range w.ctrs {
			setContainerStatus(st, c, w.pod)
		}
	})
}

func (w *podWorker) updateStatus() {
	if err := w.patchStatus(func(st *corev1.PodStatus) {
		w.mu.Lock()
		defer w.mu.Unlock()
		allReady, allDone, anyFailed, anyRunning := true, true, w.initFailed, false
		w.setInitialized(st)
		for _, c := range w.ctrs {
			setContainerStatus(st, c, w.pod)
			if c.kind == kindInit {
				continue
			}
			if c.kind == kindSidecar { // ready with the app containers; its exit code not in the phase
				if !c.running {
					allReady = false
				} else if w.initialized {
					allDone = false // the pod ends when its sidecars have stopped too
					anyRunning = true
				}
				continue
			}
			if !c.running {
				allReady = false
			} else {
				anyRunning = true
			}
			if !c.done {
				allDone = false
			} else if c.state != nil && c.state.ExitCode != 0 {
				anyFailed = true
			}
		}
		switch {
		case allDone && anyFailed:
			st.Phase = corev1.PodFailed
		case allDone:
			st.Phase = corev1.PodSucceeded
		case anyRunning && w.initialized:
			st.Phase = corev1.PodRunning
		}
		ready := corev1.ConditionFalse
		reason := "ContainersNotReady"
		if allReady {
			ready, reason = corev1.ConditionTrue, ""
		} else if allDone {
			reason = "PodCompleted"
		}
		setCondition(st, corev1.ContainersReady, ready, reason)
		setCondition(st, corev1.PodReady, ready, reason)
		if allDone {
			setCondition(st, corev1.PodReadyToStartContainers, corev1.ConditionFalse, "")
		}
	}); err != nil {
		w.logf("status: %v", err)
	}
}

// setInitialized writes the Initialized condition as a kubelet does; w.mu held.
func (w *podWorker) setInitialized(st *corev1.PodStatus) {
	switch {
	case w.initialized:
		setCondition(st, corev1.PodInitialized, corev1.ConditionTrue, "")
	default:
		setCondition(st, corev1.PodInitialized, corev1.ConditionFalse, "ContainersNotInitialized")
	}
}

func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, reason string) {
	now := metav1.Now()
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			if st.Conditions[i].Status != s {
				st.Conditions[i].LastTransitionTime = now
			}
			st.Conditions[i].Status, st.Conditions[i].Reason = s, reason
			return
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now})
}

func setContainerStatus(st *corev1.PodStatus, c *containerRun, pod *corev1.Pod) {
	cs := corev1.ContainerStatus{Name: c.name, Image: c.spec.Image, ImageID: "", ContainerID: c.id,
		RestartCount: int32(c.restarts), Ready: c.running}
	started := c.running
	cs.Started = &started
	if c.kind == kindInit { // a kubelet calls a completed init container ready
		cs.Ready = c.done && c.state != nil && c.state.ExitCode == 0
	}
	switch {
	case c.running:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt)}
		if c.state != nil {
			cs.LastTerminationState.Terminated = c.state
		}
	case c.done && c.state != nil:
		cs.State.Terminated = c.state
		if c.last != nil {
			cs.LastTerminationState.Terminated = c.last
		}
	default:
		reason := c.waiting
		if reason == "" {
			reason = "ContainerCreating"
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: c.waitMsg}
		if c.state != nil {
			cs.LastTerminationState.Terminated = c.state
		}
	}
	list := &st.ContainerStatuses
	if c.kind != kindApp {
		list = &st.InitContainerStatuses
	}
	for i := range *list {
		if (*list)[i].Name == c.name {
			(*list)[i] = cs
			return
		}
	}
	*list = append(*list, cs)
}

// patchStatus applies f to the pod's newest status and writes it, retrying on conflicts.
func (w *podWorker) patchStatus(f func(*corev1.PodStatus)) error {
	ctx := context.Background()
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		p, err := w.r.cs.CoreV1().Pods(w.ns).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		if p.UID != w.uid {
			return nil
		}
		f(&p.Status)
		_, err = w.r.cs.CoreV1().Pods(w.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}
