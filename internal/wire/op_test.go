package wire

import (
	"slices"
	"strings"
	"testing"
)

func TestOps(t *testing.T) {
	ops := Ops()
	if !slices.IsSorted(ops) {
		t.Errorf("Ops() = %v, not in numeric order", ops)
	}
	if len(ops) != len(opNames) {
		t.Errorf("Ops() lists %d opcodes, opNames %d", len(ops), len(opNames))
	}
	seen := map[string]Op{}
	for _, op := range ops {
		name := op.String()
		if name != opNames[op] || name == "" || strings.ToUpper(name) != name {
			t.Errorf("op 0x%02X: String() = %q", uint8(op), name)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("ops 0x%02X and 0x%02X share the name %s", uint8(prev), uint8(op), name)
		}
		seen[name] = op
		if !op.Known() {
			t.Errorf("%v is listed but not Known", op)
		}
	}
	for i := 0; i < 256; i++ {
		op := Op(i)
		if _, ok := opNames[op]; ok {
			continue
		}
		if op.Known() || op.IsRequest() {
			t.Errorf("unassigned op 0x%02X: Known %v IsRequest %v", i, op.Known(), op.IsRequest())
		}
		if s := op.String(); !strings.HasPrefix(s, "OP_") {
			t.Errorf("unassigned op 0x%02X: String() = %q, want OP_ prefix", i, s)
		}
	}
}

func TestOpIsRequest(t *testing.T) {
	requests := []Op{
		OpShares, OpStat, OpReadDir, OpRead, OpGet, OpStatfs, OpGetXattr, OpListXattr, OpWatch, OpStream,
		OpPut, OpMkdir, OpSymlink, OpSetAttr, OpCreate, OpWrite, OpUnlink, OpRmdir, OpRename, OpLink,
		OpSetXattr, OpRemoveXattr, OpFallocate, OpFsync, OpMknod, OpPunch, OpList, OpApply,
	}
	for _, op := range Ops() {
		if got, want := op.IsRequest(), slices.Contains(requests, op); got != want {
			t.Errorf("%v.IsRequest() = %v, want %v", op, got, want)
		}
	}
}

// The opcode ranges of docs/PROTOCOL.md: 0x01-0x0F link and exchange control (EVENTS among
// them: it travels inside a WATCH exchange), 0x10-0x1F requests that read a share, 0x20-0x2F
// requests that change it, 0x30-0x3F requests about the link itself.
func TestOpRanges(t *testing.T) {
	for _, op := range Ops() {
		switch {
		case op >= 0x01 && op <= 0x0F:
			if op.IsRequest() {
				t.Errorf("%v (0x%02X) is in the control range but IsRequest", op, uint8(op))
			}
		case op >= 0x10 && op <= 0x3F:
			if !op.IsRequest() {
				t.Errorf("%v (0x%02X) is in the request range but not IsRequest", op, uint8(op))
			}
		default:
			t.Errorf("%v has opcode 0x%02X, outside every assigned range", op, uint8(op))
		}
	}
	if OpEvents.IsRequest() {
		t.Error("EVENTS opens no exchange: it is a frame of a WATCH exchange")
	}
}
