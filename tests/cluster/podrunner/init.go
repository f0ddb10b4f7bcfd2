package main

// pod-init: the first program of a container, started by the runner in a new mount and UTS
// namespace with the pod's network namespace as fd 3 and a status pipe as fd 4. It joins the
// pod's network, builds the container's root (the host's root file system under an overlay, so
// that mount points and writes stay inside the pod, plus fresh /dev, /tmp and /run as a
// container runtime gives them), mounts the pod's volumes where the spec says, sets the pod's
// hostname, chroots and execs the container's command. A failure before the exec is written to
// the status pipe; after a successful exec the pipe just closes (it is close-on-exec).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

type mountSpec struct {
	Source   string `json:"source,omitempty"` // a host path; empty for tmpfs
	Target   string `json:"target"`           // the path in the container
	Tmpfs    bool   `json:"tmpfs,omitempty"`
	Size     string `json:"size,omitempty"` // tmpfs size= option
	ReadOnly bool   `json:"readOnly,omitempty"`
}

type initSpec struct {
	RuntimeDir string      `json:"runtimeDir"` // where the container's root is assembled
	Hostname   string      `json:"hostname"`
	Mounts     []mountSpec `json:"mounts"`
	WorkDir    string      `json:"workDir"`
	Argv       []string    `json:"argv"`
	Env        []string    `json:"env"`
}

// The devices a container runtime puts in a container's /dev (runc's defaults).
var defaultDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}

func podInit(args []string) {
	status := os.NewFile(4, "status")
	unix.CloseOnExec(4)
	fail := func(format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		if status != nil {
			_, _ = status.Write([]byte(msg))
		} else {
			fmt.Fprintln(os.Stderr, msg)
		}
		os.Exit(127)
	}
	if len(args) != 1 {
		fail("pod-init: expected the path of the container's spec")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fail("pod-init: %v", err)
	}
	var s initSpec
	if err := json.Unmarshal(b, &s); err != nil {
		fail("pod-init: %s: %v", args[0], err)
	}
	if err := unix.Setns(3, unix.CLONE_NEWNET); err != nil {
		fail("joining the pod's network namespace: %v", err)
	}
	unix.Close(3)
	root, err := buildRoot(&s)
	if err != nil {
		fail("%v", err)
	}
	if s.Hostname != "" {
		if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
			fail("sethostname %q: %v", s.Hostname, err)
		}
	}
	if err := unix.Chroot(root); err != nil {
		fail("chroot: %v", err)
	}
	wd := s.WorkDir
	if wd == "" {
		wd = "/"
	}
	if err := os.MkdirAll(wd, 0o755); err != nil {
		fail("working directory %q: %v", wd, err)
	}
	if err := unix.Chdir(wd); err != nil {
		fail("working directory %q: %v", wd, err)
	}
	if len(s.Argv) == 0 {
		fail("the container has no command: set command or args")
	}
	// the command is looked up in the container's PATH, as a runtime does
	os.Clearenv()
	for _, kv := range s.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			os.Setenv(k, v)
		}
	}
	path := s.Argv[0]
	if !strings.Contains(path, "/") {
		if path, err = exec.LookPath(path); err != nil {
			fail("exec: %q: executable file not found in $PATH", s.Argv[0])
		}
	}
	err = unix.Exec(path, s.Argv, s.Env)
	fail("exec %q: %v", s.Argv[0], err)
}

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", src, dst, err)
	}
	return nil
}

// buildRoot assembles the container's root file system and returns its path.
func buildRoot(s *initSpec) (string, error) {
	// nothing mounted from here on is seen outside this namespace
	if err := mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", err
	}
	rt := s.RuntimeDir
	if err := os.MkdirAll(rt, 0o700); err != nil {
		return "", err
	}
	// the overlay's upper layer on a tmpfs of its own: a separate file system from the lower
	// one (which is "/", and contains rt), as overlayfs requires
	if err := mount("tmpfs", rt, "tmpfs", 0, "mode=700"); err != nil {
		return "", err
	}
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(rt, d), 0o755); err != nil {
			return "", err
		}
	}
	root := filepath.Join(rt, "root")
	opts := fmt.Sprintf("lowerdir=/,upperdir=%s/upper,workdir=%s/work", rt, rt)
	if err := mount("overlay", root, "overlay", 0, opts); err != nil {
		return "", err
	}
	// kernel file systems: the host's /proc and /sys; a /dev of our own
	for _, d := range []string{"proc", "sys"} {
		if err := mount("/"+d, filepath.Join(root, d), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return "", err
		}
	}
	dev := filepath.Join(root, "dev")
	if err := mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID, "mode=755,size=65536k"); err != nil {
		return "", err
	}
	for _, d := range defaultDevices {
		p := filepath.Join(dev, d)
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return "", err
		}
		if err := mount("/dev/"+d, p, "", unix.MS_BIND, ""); err != nil {
			return "", err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := mount("/dev/pts", filepath.Join(dev, "pts"), "", unix.MS_BIND, ""); err != nil {
		return "", err
	}
	// a container's /dev/shm is a tmpfs of 64 MB unless a volume says otherwise
	if err := mount("shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=65536k"); err != nil {
		return "", err
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return "", err
		}
	}
	for _, d := range []string{"tmp", "run"} {
		if err := mount("tmpfs", filepath.Join(root, d), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return "", err
		}
	}
	for _, m := range s.Mounts {
		if err := mountInto(root, m); err != nil {
			return "", err
		}
	}
	return root, nil
}

// mountInto mounts m at its target inside root; symlinks on the way are resolved inside root.
func mountInto(root string, m mountSpec) error {
	parent, err := securejoin.SecureJoin(root, filepath.Dir(m.Target))
	if err != nil {
		return fmt.Errorf("volume mount %s: %w", m.Target, err)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("volume mount %s: %w", m.Target, err)
	}
	target := filepath.Join(parent, filepath.Base(m.Target))
	isFile := false
	if !m.Tmpfs {
		st, err := os.Stat(m.Source)
		if err != nil {
			return fmt.Errorf("volume mount %s: %w", m.Target, err)
		}
		isFile = !st.IsDir()
	}
	// a symlink at the mount point (/etc/resolv.conf often is one) is replaced, not followed
	if st, err := os.Lstat(target); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if err := os.Remove(target); err != nil {
			return err
		}
	}
	if isFile {
		if _, err := os.Stat(target); os.IsNotExist(err) {
			if err := os.WriteFile(target, nil, 0o644); err != nil {
				return fmt.Errorf("volume mount %s: %w", m.Target, err)
			}
		}
	} else if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("volume mount %s: %w", m.Target, err)
	}
	if m.Tmpfs {
		opts := "mode=1777"
		if m.Size != "" {
			opts += ",size=" + m.Size
		}
		return mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
	}
	if err := mount(m.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if m.ReadOnly {
		return mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	return nil
}
