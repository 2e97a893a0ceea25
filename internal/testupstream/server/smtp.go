package server

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// SMTPSink accepts every mail for any recipient and records it. It speaks
// enough ESMTP for net/smtp and common clients: EHLO/HELO, MAIL, RCPT,
// DATA, RSET, NOOP, VRFY (252), QUIT, and STARTTLS when TLS is set.
type SMTPSink struct {
	Rec      *Recorder
	Hostname string      // in the greeting and EHLO answer; default "upstream.test"
	TLS      *tls.Config // STARTTLS is offered when set
	MaxSize  int64       // of one message; default 10 MiB

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

const (
	smtpIdle    = 2 * time.Minute
	maxLine     = 4096
	maxRcpts    = 100
	defaultSize = 10 << 20
)

// Serve accepts sessions on ln until Close (then it returns nil) or ln
// fails.
func (s *SMTPSink) Serve(ln net.Listener) error {
	if !s.track(ln, nil) {
		return errors.New("smtp sink closed")
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("smtp accept: %w", err)
		}
		if !s.track(nil, c) {
			_ = c.Close()
			return nil
		}
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.session(c, ln.Addr().String())
		}()
	}
}

func (s *SMTPSink) track(ln net.Listener, c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.lns == nil {
		s.lns, s.conns = map[net.Listener]struct{}{}, map[net.Conn]struct{}{}
	}
	if ln != nil {
		s.lns[ln] = struct{}{}
	}
	if c != nil {
		s.conns[c] = struct{}{}
		s.wg.Add(1)
	}
	return true
}

func (s *SMTPSink) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// Close stops every listener and session and waits for the sessions.
func (s *SMTPSink) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

type smtpSession struct {
	s      *SMTPSink
	conn   net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	listen string
	tls    bool
	helo   string
	from   string
	to     []string
	mail   bool
}

func (s *SMTPSink) session(c net.Conn, listen string) {
	defer c.Close()
	host := s.Hostname
	if host == "" {
		host = "upstream.test"
	}
	ss := &smtpSession{s: s, conn: c, listen: listen}
	ss.setConn(c)
	ss.reply("220 %s ESMTP agentflow test upstream", host)
	for {
		_ = ss.conn.SetDeadline(time.Now().Add(smtpIdle))
		line, err := ss.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			ss.reply("500 5.5.6 line too long")
			return
		}
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(strings.TrimRight(string(line), "\r\n"), " ")
		arg = strings.TrimSpace(arg)
		switch strings.ToUpper(verb) {
		case "EHLO":
			ss.helo, ss.mail, ss.from, ss.to = arg, false, "", nil
			lines := []string{host + " greets " + arg, "8BITMIME", fmt.Sprintf("SIZE %d", s.maxSize())}
			if s.TLS != nil && !ss.tls {
				lines = append(lines, "STARTTLS")
			}
			for i, l := range lines {
				sep := "-"
				if i == len(lines)-1 {
					sep = " "
				}
				ss.write("250" + sep + l)
			}
			ss.flush()
		case "HELO":
			ss.helo, ss.mail, ss.from, ss.to = arg, false, "", nil
			ss.reply("250 %s", host)
		case "MAIL":
			addr, ok := pathArg(arg, "FROM:")
			switch {
			case ss.helo == "":
				ss.reply("503 5.5.1 EHLO or HELO first")
			case !ok:
				ss.reply("501 5.5.4 syntax: MAIL FROM:<address>")
			case ss.mail:
				ss.reply("503 5.5.1 nested MAIL command")
			default:
				ss.mail, ss.from, ss.to = true, addr, nil
				ss.reply("250 2.1.0 OK")
			}
		case "RCPT":
			addr, ok := pathArg(arg, "TO:")
			switch {
			case !ss.mail:
				ss.reply("503 5.5.1 MAIL first")
			case !ok || addr == "":
				ss.reply("501 5.5.4 syntax: RCPT TO:<address>")
			case len(ss.to) >= maxRcpts:
				ss.reply("452 4.5.3 too many recipients")
			default:
				ss.to = append(ss.to, addr)
				ss.reply("250 2.1.5 OK")
			}
		case "DATA":
			if len(ss.to) == 0 {
				ss.reply("503 5.5.1 RCPT first")
				continue
			}
			ss.reply("354 End data with <CR><LF>.<CR><LF>")
			data, err := io.ReadAll(io.LimitReader(textproto.NewReader(ss.r).DotReader(), s.maxSize()+1))
			if err != nil {
				return
			}
			if int64(len(data)) > s.maxSize() {
				ss.reply("552 5.3.4 message too big")
				return
			}
			s.Rec.addMessage(Message{Time: time.Now().UTC(), Listen: ss.listen, TLS: ss.tls, Helo: ss.helo, From: ss.from, To: ss.to, Data: string(data)})
			ss.mail, ss.from, ss.to = false, "", nil
			ss.reply("250 2.0.0 OK queued")
		case "RSET":
			ss.mail, ss.from, ss.to = false, "", nil
			ss.reply("250 2.0.0 OK")
		case "NOOP":
			ss.reply("250 2.0.0 OK")
		case "VRFY":
			ss.reply("252 2.1.5 cannot VRFY user, but will accept message")
		case "QUIT":
			ss.reply("221 2.0.0 Bye")
			return
		case "STARTTLS":
			if s.TLS == nil || ss.tls {
				ss.reply("502 5.5.1 STARTTLS not available")
				continue
			}
			ss.reply("220 2.0.0 Ready to start TLS")
			tc := tls.Server(ss.conn, s.TLS)
			if err := tc.Handshake(); err != nil {
				return
			}
			// RFC 3207: the session starts over.
			ss.setConn(tc)
			ss.tls, ss.helo, ss.mail, ss.from, ss.to = true, "", false, "", nil
		case "":
			ss.reply("500 5.5.2 empty command")
		default:
			ss.reply("502 5.5.2 command not recognized")
		}
	}
}

func (ss *smtpSession) setConn(c net.Conn) {
	ss.conn = c
	ss.r = bufio.NewReaderSize(c, maxLine)
	ss.w = bufio.NewWriter(c)
}

func (ss *smtpSession) write(line string) { _, _ = ss.w.WriteString(line + "\r\n") }
func (ss *smtpSession) flush()            { _ = ss.w.Flush() }

func (ss *smtpSession) reply(format string, args ...any) {
	ss.write(fmt.Sprintf(format, args...))
	ss.flush()
}

func (s *SMTPSink) maxSize() int64 {
	if s.MaxSize > 0 {
		return s.MaxSize
	}
	return defaultSize
}

// pathArg parses "FROM:<addr> PARAMS" (prefix FROM: or TO:, any case,
// optional space after the colon); the null path <> is addr "".
func pathArg(arg, prefix string) (string, bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", false
	}
	rest := strings.TrimSpace(arg[len(prefix):])
	if !strings.HasPrefix(rest, "<") {
		return "", false
	}
	end := strings.IndexByte(rest, '>')
	if end < 0 {
		return "", false
	}
	return rest[1:end], true
}
