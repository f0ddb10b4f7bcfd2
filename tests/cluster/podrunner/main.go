// Command podrunner is the kubelet of the test cluster: for every pod that the real scheduler
// binds to one of its nodes it runs the pod's containers as local processes, each pod in its own
// network, mount and UTS namespaces (a pod IP on a bridge, the host's root file system under an
// overlay as the image, the pod's volumes mounted where the spec says), and reports what happens
// back to the API server as the pod's status. It also serves what the cluster needs around the
// pods: the container logs the API server reads through the node (the kubelet's
// /containerLogs endpoint), the cluster DNS names of headless services (CoreDNS's rules), and the
// `kubernetes` service address the pods' in-cluster clients dial.
//
//	podrunner serve --kubeconfig F --dir D --pki P --listen 127.0.0.1:PORT --apiserver 127.0.0.1:PORT --dlk BIN
//	podrunner free-ports N      prints N free TCP ports on 127.0.0.1, one a line
//
// `podrunner pod-init` is what it runs inside a pod's namespaces before the container's command.
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
)

func init() {
	// pod-init changes the namespaces of the thread it runs on and then execs: keep the main
	// goroutine on the main thread from the start.
	if len(os.Args) > 1 && os.Args[1] == "pod-init" {
		runtime.LockOSThread()
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: podrunner serve [flags] | podrunner free-ports N\n")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serveMain(os.Args[2:]))
	case "pod-init":
		podInit(os.Args[2:]) // returns only on failure
		os.Exit(127)
	case "free-ports":
		os.Exit(freePorts(os.Args[2:]))
	default:
		usage()
	}
}

// freePorts prints N ports that were free on 127.0.0.1 a moment ago. All N listeners are open
// at once, so the N are distinct.
func freePorts(args []string) int {
	n := 1
	if len(args) > 0 {
		if _, err := fmt.Sscanf(args[0], "%d", &n); err != nil || n < 1 || n > 64 {
			fmt.Fprintf(os.Stderr, "podrunner free-ports: N must be 1 to 64\n")
			return 2
		}
	}
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintf(os.Stderr, "podrunner free-ports: %v\n", err)
			return 1
		}
		ls = append(ls, l)
	}
	for _, l := range ls {
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	return 0
}
