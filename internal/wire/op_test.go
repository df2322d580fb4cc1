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
	requests := []Op{OpShares, OpStat, OpReadDir, OpRead, OpGet, OpPut, OpMkdir, OpSymlink, OpSetAttr}
	for _, op := range Ops() {
		if got, want := op.IsRequest(), slices.Contains(requests, op); got != want {
			t.Errorf("%v.IsRequest() = %v, want %v", op, got, want)
		}
	}
}
