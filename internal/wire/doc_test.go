package wire

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const protocolDoc = "../../docs/PROTOCOL.md"

var (
	headingRe  = regexp.MustCompile(`^(#{1,6}) +(.+?) *$`)
	opcodeRe   = regexp.MustCompile("^Opcode: `?0x([0-9A-Fa-f]{2})`?\\s*$")
	opTitleRe  = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	errnoRowRe = regexp.MustCompile("^\\| *`?([0-9]+)`? *\\| *`?([A-Z][A-Z0-9_]*)`? *\\|")
)

// docSection is a ## or ### section of PROTOCOL.md and the opcodes it states.
type docSection struct {
	title   string
	line    int
	opcodes []uint8
}

// readProtocolDoc returns the ## and ### sections of PROTOCOL.md (deeper headings stay in their
// section; fenced code is skipped) and the rows of the table under "Error codes".
func readProtocolDoc(t *testing.T) (sections []*docSection, errnoRows map[string]uint32) {
	t.Helper()
	f, err := os.Open(protocolDoc)
	if err != nil {
		t.Fatalf("the protocol is specified in docs/PROTOCOL.md: %v", err)
	}
	defer f.Close()
	errnoRows = map[string]uint32{}
	var cur *docSection
	inErrnos, fenced := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			level := len(m[1])
			if level <= 3 {
				cur = nil
				inErrnos = false
			}
			if level == 2 || level == 3 {
				cur = &docSection{title: m[2], line: n}
				sections = append(sections, cur)
			}
			if level <= 4 && strings.EqualFold(m[2], "Error codes") {
				inErrnos = true
			}
			continue
		}
		if m := opcodeRe.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseUint(m[1], 16, 8)
			if cur == nil {
				t.Errorf("PROTOCOL.md:%d: Opcode line outside a ## or ### section", n)
				continue
			}
			cur.opcodes = append(cur.opcodes, uint8(v))
		}
		if inErrnos {
			if m := errnoRowRe.FindStringSubmatch(line); m != nil {
				v, err := strconv.ParseUint(m[1], 10, 32)
				if err != nil {
					t.Errorf("PROTOCOL.md:%d: errno %s: %v", n, m[1], err)
					continue
				}
				if _, dup := errnoRows[m[2]]; dup {
					t.Errorf("PROTOCOL.md:%d: %s listed twice", n, m[2])
				}
				errnoRows[m[2]] = uint32(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sections, errnoRows
}

// PROTOCOL.md has one section per opcode, titled with its name as Op.String gives it and stating
// its value on a line "Opcode: 0xNN"; no other section states an opcode.
func TestProtocolDocMatchesOpcodes(t *testing.T) {
	sections, _ := readProtocolDoc(t)
	documented := map[string]*docSection{}
	for _, s := range sections {
		isOpTitle := opTitleRe.MatchString(s.title)
		switch {
		case len(s.opcodes) > 1:
			t.Errorf("PROTOCOL.md:%d: section %q states %d opcodes", s.line, s.title, len(s.opcodes))
		case len(s.opcodes) == 1 && !isOpTitle:
			t.Errorf("PROTOCOL.md:%d: section %q states an opcode but is not titled with an opcode name", s.line, s.title)
		case len(s.opcodes) == 0 && isOpTitle:
			t.Errorf("PROTOCOL.md:%d: section %s has no \"Opcode: 0xNN\" line", s.line, s.title)
		}
		if len(s.opcodes) == 0 || !isOpTitle {
			continue
		}
		if prev, dup := documented[s.title]; dup {
			t.Errorf("PROTOCOL.md:%d: %s is specified again (first at line %d)", s.line, s.title, prev.line)
		}
		documented[s.title] = s
	}
	byName := map[string]Op{}
	for _, op := range Ops() {
		byName[op.String()] = op
		s, ok := documented[op.String()]
		if !ok {
			t.Errorf("PROTOCOL.md has no section for %v (0x%02X)", op, uint8(op))
			continue
		}
		if Op(s.opcodes[0]) != op {
			t.Errorf("PROTOCOL.md:%d: %s has opcode 0x%02X, wire has 0x%02X", s.line, s.title, s.opcodes[0], uint8(op))
		}
	}
	for name, s := range documented {
		if _, ok := byName[name]; !ok {
			t.Errorf("PROTOCOL.md:%d: section %s (opcode 0x%02X) names no opcode of wire", s.line, name, s.opcodes[0])
		}
	}
}

// The "Error codes" table lists every wire.Errno with its number, and nothing else.
func TestProtocolDocListsErrnos(t *testing.T) {
	_, rows := readProtocolDoc(t)
	for code, name := range errnoNames {
		v, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("PROTOCOL.md's Error codes table lacks %s (%d)", name, uint32(code))
		case v != uint32(code):
			t.Errorf("PROTOCOL.md gives %s the value %d, wire %d", name, v, uint32(code))
		}
	}
	known := map[string]bool{}
	for _, name := range errnoNames {
		known[name] = true
	}
	for name, v := range rows {
		if !known[name] {
			t.Errorf("PROTOCOL.md's Error codes table lists %s (%d), which wire does not define", name, v)
		}
	}
}
