package main

// The pod network. Nothing of it is in the host's network namespace: a "hub" namespace, held by
// this process, has a bridge with the pods' gateway address and, on its loopback, the service
// addresses the pods dial (the `kubernetes` service, the cluster DNS); each pod gets a namespace
// of its own whose eth0 is one end of a veth pair, the other end on the hub's bridge. So every
// pod has its own IP and its own ports (two jobs' rank 0 both listen on 29500, as in a cluster),
// nothing a pod listens on is reachable from outside, and two test clusters on one machine
// (two engineers' `make test`) cannot see each other: interface names are per namespace.

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

type podNet struct {
	host    netns.NsHandle
	hub     netns.NsHandle
	hubH    *netlink.Handle
	bridge  netlink.Link
	cidr    *net.IPNet
	gateway net.IP
	mu      sync.Mutex
	used    map[uint32]bool
	next    uint32
}

func ipToU32(ip net.IP) uint32 { return binary.BigEndian.Uint32(ip.To4()) }

func u32ToIP(v uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, v)
	return ip
}

// newPodNet makes the hub namespace: its loopback up with the service addresses on it, and the
// bridge br0 holding the first address of cidr (the pods' default gateway).
func newPodNet(cidr string, serviceIPs []net.IP) (*podNet, error) {
	_, ipn, err := net.ParseCIDR(cidr)
	if err != nil || ipn.IP.To4() == nil {
		return nil, fmt.Errorf("pod CIDR %q: not an IPv4 network", cidr)
	}
	n := &podNet{cidr: ipn, used: map[uint32]bool{}}
	n.gateway = u32ToIP(ipToU32(ipn.IP) + 1)
	n.next = ipToU32(ipn.IP) + 2

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if n.host, err = netns.Get(); err != nil {
		return nil, fmt.Errorf("reading this process's network namespace: %w", err)
	}
	if n.hub, err = netns.New(); err != nil {
		return nil, fmt.Errorf("creating the pod network's namespace: %w", err)
	}
	// back to the host's namespace whatever happens below; the hub is configured by handle
	if err := netns.Set(n.host); err != nil {
		panic(fmt.Sprintf("cannot return to the host network namespace: %v", err))
	}
	if n.hubH, err = netlink.NewHandleAt(n.hub); err != nil {
		return nil, err
	}
	lo, err := n.hubH.LinkByName("lo")
	if err != nil {
		return nil, err
	}
	if err := n.hubH.LinkSetUp(lo); err != nil {
		return nil, fmt.Errorf("hub: lo up: %w", err)
	}
	for _, ip := range serviceIPs {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}
		if err := n.hubH.AddrAdd(lo, a); err != nil {
			return nil, fmt.Errorf("hub: address %s: %w", ip, err)
		}
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := n.hubH.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("hub: bridge: %w", err)
	}
	if n.bridge, err = n.hubH.LinkByName("br0"); err != nil {
		return nil, err
	}
	// A bridge without an address of its own takes the lowest of its ports' and changes it when
	// that port goes: a pod whose neighbour exited would then send to the gateway's old MAC until
	// its ARP entry aged out (seconds of "cannot connect" to the services). A set address stays.
	if err := n.hubH.LinkSetHardwareAddr(n.bridge, net.HardwareAddr{0x02, 0x64, 0x6c, 0x6b, 0x00, 0x01}); err != nil {
		return nil, fmt.Errorf("hub: bridge address: %w", err)
	}
	ones, _ := ipn.Mask.Size()
	if err := n.hubH.AddrAdd(n.bridge, &netlink.Addr{IPNet: &net.IPNet{IP: n.gateway, Mask: net.CIDRMask(ones, 32)}}); err != nil {
		return nil, fmt.Errorf("hub: gateway address: %w", err)
	}
	if err := n.hubH.LinkSetUp(n.bridge); err != nil {
		return nil, fmt.Errorf("hub: bridge up: %w", err)
	}
	return n, nil
}

// inHub runs f on a thread inside the hub's namespace: sockets f opens live there.
func (n *podNet) inHub(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := netns.Set(n.hub); err != nil {
		return err
	}
	ferr := f()
	if err := netns.Set(n.host); err != nil {
		panic(fmt.Sprintf("cannot return to the host network namespace: %v", err))
	}
	return ferr
}

func (n *podNet) alloc() (net.IP, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ones, bits := n.cidr.Mask.Size()
	size := uint32(1) << uint(bits-ones)
	base := ipToU32(n.cidr.IP)
	for i := uint32(0); i < size; i++ {
		v := n.next
		n.next++
		if n.next >= base+size-1 {
			n.next = base + 2
		}
		if !n.used[v] {
			n.used[v] = true
			return u32ToIP(v), nil
		}
	}
	return nil, fmt.Errorf("no free address left in %s", n.cidr)
}

func (n *podNet) free(ip net.IP) {
	n.mu.Lock()
	delete(n.used, ipToU32(ip))
	n.mu.Unlock()
}

func vethName(ip net.IP) string {
	v := ipToU32(ip)
	return fmt.Sprintf("vp%06x", v&0xffffff)
}

// addPod makes a pod's namespace with eth0 at a fresh address, routed through the hub.
func (n *podNet) addPod() (netns.NsHandle, net.IP, error) {
	ip, err := n.alloc()
	if err != nil {
		return -1, nil, err
	}
	ns, err := func() (netns.NsHandle, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ns, err := netns.New()
		if err != nil {
			return -1, err
		}
		if err := netns.Set(n.host); err != nil {
			panic(fmt.Sprintf("cannot return to the host network namespace: %v", err))
		}
		return ns, nil
	}()
	if err != nil {
		n.free(ip)
		return -1, nil, fmt.Errorf("creating the pod's network namespace: %w", err)
	}
	if err := n.plug(ns, ip); err != nil {
		n.unplug(ns, ip)
		return -1, nil, err
	}
	return ns, ip, nil
}

func (n *podNet) plug(ns netns.NsHandle, ip net.IP) error {
	podH, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer podH.Close()
	name := vethName(ip)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MasterIndex: n.bridge.Attrs().Index},
		PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := n.hubH.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth for %s: %w", ip, err)
	}
	hubEnd, err := n.hubH.LinkByName(name)
	if err != nil {
		return err
	}
	if err := n.hubH.LinkSetUp(hubEnd); err != nil {
		return err
	}
	lo, err := podH.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := podH.LinkSetUp(lo); err != nil {
		return err
	}
	eth, err := podH.LinkByName("eth0")
	if err != nil {
		return err
	}
	ones, _ := n.cidr.Mask.Size()
	if err := podH.AddrAdd(eth, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(ones, 32)}}); err != nil {
		return fmt.Errorf("pod address %s: %w", ip, err)
	}
	if err := podH.LinkSetUp(eth); err != nil {
		return err
	}
	if err := podH.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: n.gateway}); err != nil {
		return fmt.Errorf("pod default route: %w", err)
	}
	return nil
}

// unplug removes what addPod made; the namespace itself goes when its last process does.
func (n *podNet) unplug(ns netns.NsHandle, ip net.IP) {
	if l, err := n.hubH.LinkByName(vethName(ip)); err == nil {
		_ = n.hubH.LinkDel(l)
	}
	if ns >= 0 {
		ns.Close()
	}
	n.free(ip)
}
