package main

// A container's environment as the kubelet makes it: the service variables (the `kubernetes`
// service always, the pod namespace's services when enableServiceLinks is not false), envFrom,
// then env in order with $(VAR) expansion, valueFrom resolved through the downward API
// (fieldRef, resourceFieldRef) and ConfigMap/Secret keys; plus what a runtime adds (PATH,
// HOSTNAME, HOME) when the spec does not set them.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/api/v1/resource"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// podFieldValue is the downward API's value of a pod field.
func podFieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIPs":
		var ips []string
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "status.podIPs":
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, path)
}

// serviceEnv is the docker-links style variables of one service.
func serviceEnv(svc *corev1.Service, add func(k, v string)) {
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return
	}
	name := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_"))
	ip := svc.Spec.ClusterIP
	add(name+"_SERVICE_HOST", ip)
	add(name+"_SERVICE_PORT", strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			add(name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), strconv.Itoa(int(p.Port)))
		}
	}
	first := svc.Spec.Ports[0]
	add(name+"_PORT", fmt.Sprintf("%s://%s:%d", strings.ToLower(string(first.Protocol)), ip, first.Port))
	for _, p := range svc.Spec.Ports {
		proto := strings.ToUpper(string(p.Protocol))
		prefix := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, proto)
		add(prefix, fmt.Sprintf("%s://%s:%d", strings.ToLower(proto), ip, p.Port))
		add(prefix+"_PROTO", strings.ToLower(proto))
		add(prefix+"_PORT", strconv.Itoa(int(p.Port)))
		add(prefix+"_ADDR", ip)
	}
}

type envBuilder struct {
	keys []string
	vals map[string]string
}

func (e *envBuilder) set(k, v string) {
	if e.vals == nil {
		e.vals = map[string]string{}
	}
	if _, ok := e.vals[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

func (e *envBuilder) list() []string {
	out := make([]string, 0, len(e.keys))
	for _, k := range e.keys {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}

// containerEnv resolves c's environment in pod; services are those of the pod's namespace and
// the `kubernetes` service of "default".
func containerEnv(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container,
	services []*corev1.Service, hostname string) ([]string, error) {
	var e envBuilder
	svcVars := map[string]string{}
	addSvc := func(k, v string) { svcVars[k] = v }
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	for _, s := range services {
		if s.Namespace == "default" && s.Name == "kubernetes" {
			serviceEnv(s, addSvc)
		} else if links && s.Namespace == pod.Namespace {
			serviceEnv(s, addSvc)
		}
	}
	svcKeys := make([]string, 0, len(svcVars))
	for k := range svcVars {
		svcKeys = append(svcKeys, k)
	}
	sort.Strings(svcKeys)

	cms := map[string]*corev1.ConfigMap{}
	secrets := map[string]*corev1.Secret{}
	getCM := func(name string) (*corev1.ConfigMap, error) {
		if cm, ok := cms[name]; ok {
			return cm, nil
		}
		cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		cms[name] = cm
		return cm, nil
	}
	getSecret := func(name string) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		secrets[name] = s
		return s, nil
	}

	// what the "image" sets, overridable by the spec
	e.set("PATH", defaultPath)
	e.set("HOSTNAME", hostname)
	e.set("HOME", "/root")
	// The GPU nodes here are capacity on paper: no device exists. Where the NVIDIA device plugin
	// would hand the container its GPUs, the runner tells dlk to compute on the CPU instead, so a
	// worker that a real GPU pod would require CUDA of still runs (the spec may override it).
	if q, ok := c.Resources.Limits["nvidia.com/gpu"]; ok && !q.IsZero() {
		e.set("DLK_DEVICE", "cpu")
	}
	for _, src := range c.EnvFrom {
		switch {
		case src.ConfigMapRef != nil:
			cm, err := getCM(src.ConfigMapRef.Name)
			if err != nil {
				if src.ConfigMapRef.Optional != nil && *src.ConfigMapRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom configMap %q: %w", src.ConfigMapRef.Name, err)
			}
			for k, v := range cm.Data {
				e.set(src.Prefix+k, v)
			}
		case src.SecretRef != nil:
			s, err := getSecret(src.SecretRef.Name)
			if err != nil {
				if src.SecretRef.Optional != nil && *src.SecretRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", src.SecretRef.Name, err)
			}
			for k, v := range s.Data {
				e.set(src.Prefix+k, string(v))
			}
		}
	}
	mapping := func() func(string) string {
		cur := map[string]string{}
		for k, v := range e.vals {
			cur[k] = v
		}
		return expansion.MappingFuncFor(cur, svcVars)
	}
	for _, ev := range c.Env {
		if ev.ValueFrom == nil {
			e.set(ev.Name, expansion.Expand(ev.Value, mapping()))
			continue
		}
		vf := ev.ValueFrom
		var v string
		var err error
		switch {
		case vf.FieldRef != nil:
			v, err = podFieldValue(pod, vf.FieldRef.FieldPath)
		case vf.ResourceFieldRef != nil:
			v, err = resource.ExtractContainerResourceValue(vf.ResourceFieldRef, c)
		case vf.ConfigMapKeyRef != nil:
			var cm *corev1.ConfigMap
			if cm, err = getCM(vf.ConfigMapKeyRef.Name); err == nil {
				var ok bool
				if v, ok = cm.Data[vf.ConfigMapKeyRef.Key]; !ok {
					err = fmt.Errorf("key %q not found in configMap %q", vf.ConfigMapKeyRef.Key, cm.Name)
				}
			}
			if err != nil && vf.ConfigMapKeyRef.Optional != nil && *vf.ConfigMapKeyRef.Optional {
				continue
			}
		case vf.SecretKeyRef != nil:
			var s *corev1.Secret
			if s, err = getSecret(vf.SecretKeyRef.Name); err == nil {
				b, ok := s.Data[vf.SecretKeyRef.Key]
				if !ok {
					err = fmt.Errorf("key %q not found in secret %q", vf.SecretKeyRef.Key, s.Name)
				}
				v = string(b)
			}
			if err != nil && vf.SecretKeyRef.Optional != nil && *vf.SecretKeyRef.Optional {
				continue
			}
		default:
			err = fmt.Errorf("unsupported valueFrom")
		}
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", ev.Name, err)
		}
		e.set(ev.Name, v)
	}
	// the service variables come after, as the kubelet appends them where not set
	for _, k := range svcKeys {
		if _, ok := e.vals[k]; !ok {
			e.set(k, svcVars[k])
		}
	}
	return e.list(), nil
}

// containerArgv is command + args with $(VAR) expanded from env.
func containerArgv(c *corev1.Container, env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	m := expansion.MappingFuncFor(vars)
	var argv []string
	for _, a := range c.Command {
		argv = append(argv, expansion.Expand(a, m))
	}
	for _, a := range c.Args {
		argv = append(argv, expansion.Expand(a, m))
	}
	return argv
}
