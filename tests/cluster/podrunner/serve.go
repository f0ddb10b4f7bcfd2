package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/util/flushwriter"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crilogs "k8s.io/cri-client/pkg/logs"
	"k8s.io/klog/v2"
)

var everything = labels.Everything()

type runner struct {
	cs       kubernetes.Interface
	dir      string
	dlk      string
	extra    []mountSpec // more of the "image": host directories every container sees, read-only
	self     string
	zone     string
	nodeIP   string
	dnsIP    net.IP
	net      *podNet
	services corelisters.ServiceLister
	recorder record.EventRecorder
	stop     chan struct{}

	mu     sync.Mutex
	pods   map[string]*podWorker // by uid
	byName map[string]*podWorker // by namespace/name
	wg     sync.WaitGroup
}

func (r *runner) event(pod *corev1.Pod, typ, reason, msg string) {
	r.recorder.Event(pod, typ, reason, msg)
}

func (r *runner) onPod(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" {
		return
	}
	r.mu.Lock()
	w := r.pods[string(pod.UID)]
	if w == nil {
		select {
		case <-r.stop:
			r.mu.Unlock()
			return
		default:
		}
		w = newPodWorker(r, pod)
		r.pods[string(pod.UID)] = w
		r.byName[pod.Namespace+"/"+pod.Name] = w
		r.wg.Add(1)
		go w.run(pod)
	}
	r.mu.Unlock()
	w.notify(pod)
}

func (r *runner) onPodGone(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	r.mu.Lock()
	w := r.pods[string(pod.UID)]
	r.mu.Unlock()
	if w != nil {
		w.markGone()
	}
}

func (r *runner) forget(w *podWorker) {
	r.mu.Lock()
	delete(r.pods, string(w.uid))
	if r.byName[w.ns+"/"+w.name] == w {
		delete(r.byName, w.ns+"/"+w.name)
	}
	r.mu.Unlock()
	r.wg.Done()
}

// ---- the kubelet's /containerLogs endpoint ----

// logRuntime tells the CRI log reader whether the container it follows still runs.
type logRuntime struct {
	criapi.RuntimeService
	running func() bool
}

func (l logRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	st := runtimeapi.ContainerState_CONTAINER_EXITED
	if l.running() {
		st = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: st}}, nil
}

func boolQuery(q map[string][]string, k string) bool {
	v := ""
	if len(q[k]) > 0 {
		v = q[k][0]
	}
	b, _ := strconv.ParseBool(v)
	return b
}

func (r *runner) containerLogs(rw http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		http.Error(rw, "expected /containerLogs/NAMESPACE/POD/CONTAINER", http.StatusBadRequest)
		return
	}
	ns, podName, cname := parts[0], parts[1], parts[2]
	r.mu.Lock()
	w := r.byName[ns+"/"+podName]
	r.mu.Unlock()
	if w == nil {
		http.Error(rw, fmt.Sprintf("pod %s/%s is not on this node", ns, podName), http.StatusNotFound)
		return
	}
	q := req.URL.Query()
	opts := &corev1.PodLogOptions{Follow: boolQuery(q, "follow"), Previous: boolQuery(q, "previous"),
		Timestamps: boolQuery(q, "timestamps")}
	num := func(k string) (*int64, error) {
		if len(q[k]) == 0 || q[k][0] == "" {
			return nil, nil
		}
		v, err := strconv.ParseInt(q[k][0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		return &v, nil
	}
	var err error
	if opts.TailLines, err = num("tailLines"); err == nil {
		if opts.LimitBytes, err = num("limitBytes"); err == nil {
			opts.SinceSeconds, err = num("sinceSeconds")
		}
	}
	if err == nil && len(q["sinceTime"]) > 0 && q["sinceTime"][0] != "" {
		var t time.Time
		if t, err = time.Parse(time.RFC3339, q["sinceTime"][0]); err == nil {
			mt := metav1.NewTime(t)
			opts.SinceTime = &mt
		}
	}
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	var c *containerRun
	for _, x := range w.ctrs {
		if x.name == cname {
			c = x
		}
	}
	var path string
	var msg string
	var restart int
	switch {
	case c == nil:
		msg = fmt.Sprintf("container %s is not valid for pod %s", cname, podName)
	case opts.Previous && c.restarts == 0:
		msg = fmt.Sprintf("previous terminated container %q in pod %q not found", cname, podName)
	case opts.Previous:
		restart = c.restarts - 1
	case !c.started && c.state == nil:
		msg = fmt.Sprintf("container %q in pod %q is waiting to start: %s", cname, podName, c.waiting)
	default:
		restart = c.restarts
	}
	if c != nil && msg == "" {
		path = c.logPath(w.dir, restart)
	}
	w.mu.Unlock()
	if msg != "" {
		http.Error(rw, msg, http.StatusBadRequest)
		return
	}
	if _, err := os.Stat(path); err != nil {
		http.Error(rw, fmt.Sprintf("container %q in pod %q is waiting to start", cname, podName), http.StatusBadRequest)
		return
	}
	running := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return c.running && c.restarts == restart
	}
	rw.Header().Set("Content-Type", "text/plain")
	rw.Header().Set("Transfer-Encoding", "chunked")
	fw := flushwriter.Wrap(rw)
	lo := &crilogs.LogOptions{TailLines: opts.TailLines, LimitBytes: opts.LimitBytes, Follow: opts.Follow,
		Timestamp: opts.Timestamps}
	if opts.SinceSeconds != nil {
		lo.Since = time.Now().Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	}
	if opts.SinceTime != nil && opts.SinceTime.After(lo.Since) {
		lo.Since = opts.SinceTime.Time
	}
	if err := crilogs.ReadLogs(req.Context(), path, c.id, lo,
		logRuntime{running: running}, fw, fw); err != nil && req.Context().Err() == nil {
		klog.V(2).InfoS("logs", "pod", klog.KRef(ns, podName), "err", err)
	}
}

// ---- the `kubernetes` service inside the pod network ----

func proxyTo(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func(c net.Conn) {
			defer c.Close()
			u, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, u); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			<-done
			<-done
		}(c)
	}
}

func serveMain(args []string) int {
	fs := flag.NewFlagSet("podrunner serve", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of a user that may manage pods and read volumes' sources")
	dir := fs.String("dir", "", "state directory: pods/NAMESPACE/POD/ (logs, volumes, pid files)")
	pki := fs.String("pki", "", "directory with ca.crt, kubelet.crt and kubelet.key")
	listen := fs.String("listen", "127.0.0.1:10250", "address of the kubelet API (container logs)")
	apiserver := fs.String("apiserver", "", "host:port of the API server, for the pods' `kubernetes` service")
	dlk := fs.String("dlk", "", "the dlk binary the pods' image contains, at /usr/local/bin/dlk")
	podCIDR := fs.String("pod-cidr", "10.244.0.0/16", "pod addresses")
	dnsIP := fs.String("dns-ip", "10.0.0.10", "the cluster DNS address")
	zone := fs.String("cluster-domain", "cluster.local", "the cluster's DNS domain")
	ready := fs.String("ready-file", "", "written once everything is serving")
	var extra imageMounts
	fs.Var(&extra, "mount", "HOST:TARGET, repeatable: a host directory every container sees read-only at TARGET "+
		"(what a framework image holds, e.g. a Python environment), whatever the container's fresh /tmp hides")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.Var(klogVerbosity{klogFlags}, "v", "log verbosity")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kubeconfig == "" || *dir == "" || *pki == "" || *apiserver == "" || *dlk == "" {
		fmt.Fprintln(os.Stderr, "podrunner serve: --kubeconfig, --dir, --pki, --apiserver and --dlk are required")
		return 2
	}
	if err := serve(*kubeconfig, *dir, *pki, *listen, *apiserver, *dlk, extra, *podCIDR, *dnsIP, *zone, *ready); err != nil {
		fmt.Fprintf(os.Stderr, "podrunner: %v\n", err)
		return 1
	}
	return 0
}

// imageMounts collects --mount HOST:TARGET flags
type imageMounts []mountSpec

func (m *imageMounts) String() string { return fmt.Sprint(len(*m)) }
func (m *imageMounts) Set(v string) error {
	host, target, ok := strings.Cut(v, ":")
	if !ok || !filepath.IsAbs(host) || !filepath.IsAbs(target) {
		return fmt.Errorf("--mount %q: expected HOST:TARGET, both absolute paths", v)
	}
	*m = append(*m, mountSpec{Source: host, Target: target, ReadOnly: true})
	return nil
}

type klogVerbosity struct{ fs *flag.FlagSet }

func (k klogVerbosity) String() string     { return "0" }
func (k klogVerbosity) Set(v string) error { return k.fs.Set("v", v) }

func serve(kubeconfig, dir, pki, listen, apiserver, dlk string, extra []mountSpec, podCIDR, dnsIP, zone, readyFile string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "podrunner"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r := &runner{cs: cs, dir: dir, dlk: dlk, extra: extra, self: self, zone: zone, nodeIP: "127.0.0.1",
		dnsIP: net.ParseIP(dnsIP), stop: make(chan struct{}),
		pods: map[string]*podWorker{}, byName: map[string]*podWorker{}}
	if r.dnsIP == nil || r.dnsIP.To4() == nil {
		return fmt.Errorf("--dns-ip %q: not an IPv4 address", dnsIP)
	}

	// the `kubernetes` service's address is what in-cluster clients dial
	var apiIP net.IP
	ctx := context.Background()
	for i := 0; ; i++ {
		svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err == nil && net.ParseIP(svc.Spec.ClusterIP) != nil {
			apiIP = net.ParseIP(svc.Spec.ClusterIP)
			break
		}
		if i == 300 {
			return fmt.Errorf("the API server has no `kubernetes` service: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.net, err = newPodNet(podCIDR, []net.IP{apiIP, r.dnsIP}); err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactory(cs, 0)
	r.services = factory.Core().V1().Services().Lister()
	dns := &clusterDNS{zone: zone, services: r.services,
		slices: factory.Discovery().V1().EndpointSlices().Lister()}
	podInf := factory.Core().V1().Pods().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.onPod(o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) { r.onPod(o.(*corev1.Pod)) },
		DeleteFunc: r.onPodGone,
	}); err != nil {
		return err
	}

	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	r.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "podrunner"})

	// the services the pods dial live in the hub namespace
	var apiL, dnsTCP net.Listener
	var dnsUDP net.PacketConn
	if err := r.net.inHub(func() error {
		var err error
		if apiL, err = net.Listen("tcp", net.JoinHostPort(apiIP.String(), "443")); err != nil {
			return err
		}
		if dnsUDP, err = net.ListenPacket("udp", net.JoinHostPort(dnsIP, "53")); err != nil {
			return err
		}
		dnsTCP, err = net.Listen("tcp", net.JoinHostPort(dnsIP, "53"))
		return err
	}); err != nil {
		return fmt.Errorf("pod network services: %w", err)
	}
	go proxyTo(apiL, apiserver)
	go dns.serveUDP(dnsUDP)
	go dns.serveTCP(dnsTCP)

	// the kubelet API: the API server presents its kubelet client certificate
	caPEM, err := os.ReadFile(pki + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s/ca.crt: no certificate", pki)
	}
	cert, err := tls.LoadX509KeyPair(pki+"/kubelet.crt", pki+"/kubelet.key")
	if err != nil {
		return err
	}
	kl, err := tls.Listen("tcp", listen, &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/containerLogs/", r.containerLogs)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(kl) }()

	stopInformers := make(chan struct{})
	factory.Start(stopInformers)
	for t, ok := range factory.WaitForCacheSync(stopInformers) {
		if !ok {
			return fmt.Errorf("informer %v did not sync", t)
		}
	}
	klog.InfoS("serving", "kubelet", listen, "kubernetes", apiIP, "dns", dnsIP, "pods", podCIDR)
	if readyFile != "" {
		if err := os.WriteFile(readyFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
			return err
		}
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	klog.InfoS("stopping: killing every container")
	close(stopInformers)
	r.mu.Lock()
	close(r.stop)
	r.mu.Unlock()
	waited := make(chan struct{})
	go func() { r.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(15 * time.Second):
		klog.InfoS("some pods did not stop in time")
	}
	_ = srv.Close()
	b.Shutdown()
	return nil
}
