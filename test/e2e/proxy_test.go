//go:build e2e

package e2e

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// tcpProxy forwards one loopback address to another. Stop closes the
// listener and every open connection, which is how a network partition looks
// to a Kafka client; Start listens on the same address again. Restarting the
// broker instead would wipe kfake's topics and offsets.
type tcpProxy struct {
	t      *testing.T
	listen string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newTCPProxy(t *testing.T, listen, target string) *tcpProxy {
	p := &tcpProxy{t: t, listen: listen, target: target, conns: map[net.Conn]struct{}{}}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

func (p *tcpProxy) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.listen)
	if err != nil {
		p.t.Fatalf("proxy: listen %s: %v", p.listen, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
}

func (p *tcpProxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *tcpProxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.t.Logf("proxy: accept: %v", err)
			}
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			p.t.Logf("proxy: dial %s: %v", p.target, err)
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(2)
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// track registers a connection pair unless the proxy was stopped meanwhile.
func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
