package main

// The cluster DNS, by the rules of CoreDNS's kubernetes plugin, from the Services and
// EndpointSlices the real controllers keep:
//   <svc>.<ns>.svc.<zone>           the ClusterIP; for a headless service, its endpoints' addresses
//   <host>.<svc>.<ns>.svc.<zone>    the endpoint whose hostname is <host> (a pod whose
//                                   spec.hostname is <host> and spec.subdomain is <svc>)
// An endpoint that is not ready counts only when the Service publishes not-ready addresses.
// So a rank resolves `<job>-0.<service>` only when dlk's Service, the Job's pod template
// (hostname, subdomain) and the pod IPs fit together, as in a real cluster. Anything outside the
// zone is NXDOMAIN: tests never reach the network.

import (
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/klog/v2"
)

const dnsTTL = 5

type clusterDNS struct {
	zone     string // "cluster.local"
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
}

// lookup answers the A records of name (lower case, no trailing dot); ok is false when the name
// does not exist.
func (d *clusterDNS) lookup(name string) (ips []net.IP, ok bool) {
	suffix := ".svc." + d.zone
	if !strings.HasSuffix(name, suffix) {
		return nil, false
	}
	parts := strings.Split(strings.TrimSuffix(name, suffix), ".")
	var host, svcName, ns string
	switch len(parts) {
	case 2:
		svcName, ns = parts[0], parts[1]
	case 3:
		host, svcName, ns = parts[0], parts[1], parts[2]
	default:
		return nil, false
	}
	svc, err := d.services.Services(ns).Get(svcName)
	if err != nil {
		return nil, false
	}
	if host == "" && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return []net.IP{net.ParseIP(svc.Spec.ClusterIP)}, true
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svcName})
	slices, err := d.slices.EndpointSlices(ns).List(sel)
	if err != nil {
		return nil, false
	}
	found := host == ""
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			if host != "" && (ep.Hostname == nil || *ep.Hostname != host) {
				continue
			}
			found = true
			for _, a := range ep.Addresses {
				if ip := net.ParseIP(a); ip != nil {
					ips = append(ips, ip)
				}
			}
		}
	}
	return ips, found
}

func (d *clusterDNS) answer(req []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired,
		OpCode: h.OpCode}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	var ips []net.IP
	ok := false
	if h.OpCode != 0 || q.Class != dnsmessage.ClassINET {
		resp.RCode = dnsmessage.RCodeNotImplemented
	} else if ips, ok = d.lookup(name); !ok {
		resp.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), resp)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil
	}
	if err := b.Question(q); err != nil {
		return nil
	}
	if err := b.StartAnswers(); err != nil {
		return nil
	}
	if ok && q.Type == dnsmessage.TypeA {
		for _, ip := range ips {
			var a dnsmessage.AResource
			copy(a.A[:], ip.To4())
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			if err := b.AResource(rh, a); err != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// serveUDP answers queries on pc until it is closed.
func (d *clusterDNS) serveUDP(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := d.answer(buf[:n]); out != nil {
			if _, err := pc.WriteTo(out, addr); err != nil {
				klog.V(2).InfoS("dns: reply", "err", err)
			}
		}
	}
}

// serveTCP answers queries on l (length-prefixed messages) until it is closed.
func (d *clusterDNS) serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func(c net.Conn) {
			defer c.Close()
			var lb [2]byte
			for {
				if _, err := readFull(c, lb[:]); err != nil {
					return
				}
				msg := make([]byte, int(lb[0])<<8|int(lb[1]))
				if _, err := readFull(c, msg); err != nil {
					return
				}
				out := d.answer(msg)
				if out == nil {
					return
				}
				if _, err := c.Write(append([]byte{byte(len(out) >> 8), byte(len(out))}, out...)); err != nil {
					return
				}
			}
		}(c)
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
