package wire

import "fmt"

// APPLY carries a mount's journal to the owner: a batch of changes (the bodies of MKDIR,
// CREATE, WRITE, RENAME and the other changing requests) numbered in the order the mount made
// them, which the owner applies in that order, once each, and answers op by op. A mount whose
// writes complete locally (its write-ahead log, internal/wal) sends them this way: many per
// round trip, several batches in flight. PROTOCOL.md, APPLY.

// JournalIDLen is the length of a journal's identity.
const JournalIDLen = 16

// JournalID names one mount's journal of one share: random, made with the journal, kept
// while it lives. The owner keeps, per journal, the last sequence number it applied.
type JournalID [JournalIDLen]byte

func (id JournalID) String() string { return fmt.Sprintf("%x", id[:]) }

// ApplyReq flags.
const (
	// ApplySync asks the owner to make everything this journal applied durable (its data and
	// names on disk, its applied mark too) before replying, and to say so in Durable.
	ApplySync  uint8 = 1 << 0
	applyKnown       = ApplySync
)

// ApplyOp flags.
const (
	// ApplyHasBase: Base follows, the state of the op's file as the mount last knew it from
	// the owner. A file whose state is neither Base nor one this journal's own ops left is a
	// conflict: the op is not applied and its result is CONFLICT.
	ApplyHasBase uint8 = 1 << 0
	applyOpKnown       = ApplyHasBase
)

// MaxApplyOps bounds the ops of one APPLY.
const MaxApplyOps = 4096

// ApplyReq is the body of APPLY.
type ApplyReq struct {
	Share   string
	Journal JournalID
	First   uint64 // sequence number of Ops[0]; the rest follow one by one
	Flags   uint8
	Ops     []ApplyOp
}

// ApplyOp is one change of a journal: the body of a changing request, exactly as it would be
// sent alone, its Share the APPLY's.
type ApplyOp struct {
	Op    Op
	Flags uint8
	Base  FileState // with ApplyHasBase
	Body  []byte
}

// Applicable reports whether op may travel in an APPLY: the requests that change a share.
func Applicable(op Op) bool {
	switch op {
	case OpMkdir, OpSymlink, OpSetAttr, OpCreate, OpWrite, OpUnlink, OpRmdir, OpRename, OpLink,
		OpSetXattr, OpRemoveXattr, OpFallocate, OpMknod:
		return true
	}
	return false
}

// AppendTo encodes an op alone, as a mount's journal records it.
func (m *ApplyOp) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.u8(uint8(m.Op))
	e.u8(m.Flags)
	if m.Flags&ApplyHasBase != 0 {
		e.u64(m.Base.Size)
		e.i64(m.Base.MtimeNs)
		e.i64(m.Base.CtimeNs)
	}
	e.bytes(m.Body)
	return e.b
}

func (m *ApplyOp) decode(d *decoder) {
	m.Op = Op(d.u8("op"))
	m.Flags = d.u8("op flags")
	if d.err == nil && !Applicable(m.Op) {
		d.err = fmt.Errorf("%w: %s cannot be applied from a journal", ErrMalformed, m.Op)
	}
	if d.err == nil && m.Flags&^applyOpKnown != 0 {
		d.err = fmt.Errorf("%w: unknown op flags %#x", ErrMalformed, m.Flags)
	}
	if m.Flags&ApplyHasBase != 0 {
		m.Base.Size = d.u64("base size")
		m.Base.MtimeNs = d.i64("base mtime")
		m.Base.CtimeNs = d.i64("base ctime")
	}
	m.Body = d.bytes("op body", MaxChunk+MaxPathLen+64)
}

// Decode decodes an op alone (AppendTo's form).
func (m *ApplyOp) Decode(b []byte) error {
	d := decoder{b: b}
	m.decode(&d)
	return d.done("journal op")
}

func (m *ApplyReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.b = append(e.b, m.Journal[:]...)
	e.u64(m.First)
	e.u8(m.Flags)
	e.u32(uint32(len(m.Ops)))
	b = e.b
	for i := range m.Ops {
		b = m.Ops[i].AppendTo(b)
	}
	return b
}

func (m *ApplyReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	copy(m.Journal[:], d.take(JournalIDLen, "journal"))
	m.First = d.u64("first")
	m.Flags = d.u8("flags")
	n := d.u32("op count")
	if d.err == nil && m.Flags&^applyKnown != 0 {
		d.err = fmt.Errorf("%w: unknown APPLY flags %#x", ErrMalformed, m.Flags)
	}
	if d.err == nil && n > MaxApplyOps {
		d.err = fmt.Errorf("%w: %d ops in one APPLY, limit %d", ErrMalformed, n, MaxApplyOps)
	}
	if d.err == nil && m.First == 0 {
		d.err = fmt.Errorf("%w: APPLY sequence numbers start at 1", ErrMalformed)
	}
	if d.err == nil && m.First+uint64(n) < m.First {
		d.err = fmt.Errorf("%w: APPLY sequence numbers overflow", ErrMalformed)
	}
	m.Ops = nil
	for i := uint32(0); i < n && d.err == nil; i++ {
		var op ApplyOp
		op.decode(&d)
		m.Ops = append(m.Ops, op)
	}
	return d.done("APPLY")
}

// ApplyResp is the reply to APPLY.
type ApplyResp struct {
	// Applied is the last sequence number of the journal the owner has applied, this batch
	// included; Durable the last one it has made durable (with ApplySync, Applied).
	Applied uint64
	Durable uint64
	// Results answer the batch's first ops one by one, in order. They may be fewer than the
	// ops: the owner stopped early (the reply's size, a deadline) or could not start (an
	// earlier batch of the journal has not arrived: no results, Applied below First-1), and
	// the ops without a result were not applied; the mount sends them again.
	Results []ApplyResult
}

// ApplyResult answers one op. Code 0: applied; Body is what the op's own request would have
// answered (an Entry, a ChangeResp, nothing), or empty if the op was applied by an earlier
// APPLY (a batch sent again after a lost reply). ErrnoConflict: not applied, the file changed
// on the owner; Body is its Entry now. Any other code: not applied, or applied in part, as
// the op's own request would fail; Body is the error's text.
type ApplyResult struct {
	Code Errno
	Body []byte
}

func (m *ApplyResp) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.u64(m.Applied)
	e.u64(m.Durable)
	e.u32(uint32(len(m.Results)))
	for _, r := range m.Results {
		e.u32(uint32(r.Code))
		e.bytes(r.Body)
	}
	return e.b
}

func (m *ApplyResp) Decode(b []byte) error {
	d := decoder{b: b}
	m.Applied = d.u64("applied")
	m.Durable = d.u64("durable")
	n := d.u32("result count")
	if d.err == nil && n > MaxApplyOps {
		d.err = fmt.Errorf("%w: %d results, limit %d", ErrMalformed, n, MaxApplyOps)
	}
	m.Results = nil
	for i := uint32(0); i < n && d.err == nil; i++ {
		r := ApplyResult{Code: Errno(d.u32("code"))}
		r.Body = d.bytes("result body", MaxFrameLen)
		m.Results = append(m.Results, r)
	}
	return d.done("APPLY reply")
}
