package discover

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Unsolicited announcements (RFC 6762 section 8.3): pion/mdns answers questions but never
// announces by itself, so a device that appears, moves or changes its tags would be heard
// only at the next question. This file sends the announcement of the service's current
// registrations, on each interface, to the mDNS groups, from a socket of its own on port 5353
// (responses must come from that port). It is sent twice, a second apart, whenever the
// registrations change or the sockets reopen (the device's addresses changed). Registrations
// replaced, and all of them when the service stops, are withdrawn with a goodbye.
//
// The socket is the service's own and is written by the run loop alone: pion's sockets set
// the outgoing multicast interface per write, which would race with a second writer.

const (
	// hostTTL and serviceTTL are the records' lifetimes in seconds (RFC 6762 section 10):
	// records naming a host or its address 120 s, the PTR 75 minutes.
	hostTTL    = 120
	serviceTTL = 4500
	// classCacheFlush marks a record as the whole set of its name and type (RFC 6762
	// section 10.2): the SRV, TXT and address records of an instance are unique to it.
	classCacheFlush = dnsmessage.Class(1 << 15)
)

// registration is one registered instance: its random names and its tags.
type registration struct {
	instance string
	host     string // without the trailing dot: "abcdef012345.local"
	text     []string
}

// announcer holds the sockets announcements leave by.
type announcer struct {
	c4 *net.UDPConn
	c6 *net.UDPConn
	p4 *ipv4.PacketConn
	p6 *ipv6.PacketConn
}

// openAnnouncer binds port 5353 for IPv4 and IPv6 (shared with the other mDNS sockets, as
// open does) and drains what the kernel also delivers to them, which nobody needs.
func openAnnouncer() (*announcer, error) {
	a := &announcer{}
	var err4, err6 error
	a.c4, err4 = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353})
	if err4 == nil {
		a.p4 = ipv4.NewPacketConn(a.c4)
		a.p4.SetMulticastTTL(255)
		a.p4.SetMulticastLoopback(true)
		go drain(a.c4)
	}
	a.c6, err6 = net.ListenUDP("udp6", &net.UDPAddr{IP: net.ParseIP("ff02::fb"), Port: 5353})
	if err6 == nil {
		a.p6 = ipv6.NewPacketConn(a.c6)
		a.p6.SetMulticastHopLimit(255)
		a.p6.SetMulticastLoopback(true)
		go drain(a.c6)
	}
	if a.c4 == nil && a.c6 == nil {
		return nil, fmt.Errorf("binding the mDNS port 5353 to announce: %w", errors.Join(err4, err6))
	}
	return a, nil
}

func drain(c *net.UDPConn) {
	buf := make([]byte, 9000)
	for {
		if _, _, err := c.ReadFrom(buf); errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

func (a *announcer) close() {
	if a.c4 != nil {
		a.c4.Close()
	}
	if a.c6 != nil {
		a.c6.Close()
	}
}

// send announces regs with port on each of ifs: over IPv4 with the interface's IPv4
// addresses, over IPv6 with its IPv6 ones, or only with only when it is valid. It returns
// the first error; an interface that cannot send does not stop the others.
func (a *announcer) send(ifs []net.Interface, only netip.Addr, port uint16, regs []registration) error {
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for i := range ifs {
		ifi := &ifs[i]
		var v4, v6 []netip.Addr
		if only.IsValid() {
			if only.Is4() {
				v4 = []netip.Addr{only}
			} else {
				v6 = []netip.Addr{only}
			}
		} else {
			v4, v6 = interfaceAddrs(ifi)
		}
		for _, r := range regs {
			if len(v4) > 0 && a.p4 != nil {
				b, err := announcement(r, port, v4)
				note(err)
				if err == nil {
					if err := a.p4.SetMulticastInterface(ifi); err != nil {
						note(err)
					} else {
						_, err := a.p4.WriteTo(b, nil, &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353})
						note(err)
					}
				}
			}
			if len(v6) > 0 && a.p6 != nil {
				b, err := announcement(r, port, v6)
				note(err)
				if err == nil {
					if err := a.p6.SetMulticastInterface(ifi); err != nil {
						note(err)
					} else {
						_, err := a.p6.WriteTo(b, nil, &net.UDPAddr{IP: net.ParseIP("ff02::fb"), Port: 5353})
						note(err)
					}
				}
			}
		}
	}
	return first
}

// goodbye tells the network that regs are gone (RFC 6762 section 10.1): their PTR records with
// a TTL of zero, over each family on each of ifs, so that browsers drop the instances now
// instead of when the PTR's 75 minutes run out.
func (a *announcer) goodbye(ifs []net.Interface, regs []registration) error {
	if len(regs) == 0 {
		return nil
	}
	b, err := goodbyeMessage(regs)
	if err != nil {
		return err
	}
	var errs []error
	for i := range ifs {
		ifi := &ifs[i]
		v4, v6 := interfaceAddrs(ifi)
		if len(v4) > 0 && a.p4 != nil {
			if err := a.p4.SetMulticastInterface(ifi); err == nil {
				_, err = a.p4.WriteTo(b, nil, &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353})
				errs = append(errs, err)
			}
		}
		if len(v6) > 0 && a.p6 != nil {
			if err := a.p6.SetMulticastInterface(ifi); err == nil {
				_, err = a.p6.WriteTo(b, nil, &net.UDPAddr{IP: net.ParseIP("ff02::fb"), Port: 5353})
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// goodbyeMessage is the response withdrawing regs: one PTR record each, TTL 0.
func goodbyeMessage(regs []registration) ([]byte, error) {
	svc, err := dnsmessage.NewName(ServiceType + ".local.")
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{Response: true, Authoritative: true})
	b.EnableCompression()
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, r := range regs {
		inst, err := dnsmessage.NewName(r.instance + "." + ServiceType + ".local.")
		if err != nil {
			return nil, err
		}
		if err := b.PTRResource(dnsmessage.ResourceHeader{Name: svc, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.PTRResource{PTR: inst}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// interfaceAddrs splits the addresses of ifi by family.
func interfaceAddrs(ifi *net.Interface) (v4, v6 []netip.Addr) {
	addrs, _ := ifi.Addrs()
	for _, x := range addrs {
		p, ok := x.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(p.IP)
		if !ok {
			continue
		}
		if ip = ip.Unmap(); ip.Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}
	return v4, v6
}

// announcement is the response announcing r at addrs: PTR, SRV, TXT and one address record
// per address, all in the answer section.
func announcement(r registration, port uint16, addrs []netip.Addr) ([]byte, error) {
	svc, err := dnsmessage.NewName(ServiceType + ".local.")
	if err != nil {
		return nil, err
	}
	inst, err := dnsmessage.NewName(r.instance + "." + ServiceType + ".local.")
	if err != nil {
		return nil, err
	}
	host, err := dnsmessage.NewName(r.host + ".")
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{Response: true, Authoritative: true})
	b.EnableCompression()
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	unique := dnsmessage.ClassINET | classCacheFlush
	err = errors.Join(
		b.PTRResource(dnsmessage.ResourceHeader{Name: svc, Class: dnsmessage.ClassINET, TTL: serviceTTL}, dnsmessage.PTRResource{PTR: inst}),
		b.SRVResource(dnsmessage.ResourceHeader{Name: inst, Class: unique, TTL: hostTTL}, dnsmessage.SRVResource{Port: port, Target: host}),
		b.TXTResource(dnsmessage.ResourceHeader{Name: inst, Class: unique, TTL: serviceTTL}, dnsmessage.TXTResource{TXT: r.text}),
	)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		h := dnsmessage.ResourceHeader{Name: host, Class: unique, TTL: hostTTL}
		if a.Is4() {
			err = b.AResource(h, dnsmessage.AResource{A: a.As4()})
		} else {
			err = b.AAAAResource(h, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	return b.Finish()
}
