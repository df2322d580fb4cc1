package wire

import "fmt"

// Op is a frame opcode. Names match the section titles of docs/PROTOCOL.md.
type Op uint8

// Link control: not part of any request.
const (
	OpHello Op = 0x01 // version negotiation, first frame each way
	OpPing  Op = 0x02 // keepalive; answered by PONG with the same payload
	OpPong  Op = 0x03
	OpClose Op = 0x04 // the sender is closing the link; carries an ERROR body as reason
)

// Exchange control: frames inside an open exchange (a tag).
const (
	OpCancel Op = 0x08 // the opener abandons the exchange
	OpCredit Op = 0x09 // the receiver of a stream allows more DATA bytes
	OpError  Op = 0x0A // the exchange failed; ends it
	OpData   Op = 0x0B // bulk bytes of a stream: offset, then raw bytes
	OpEnd    Op = 0x0C // end of a stream
)

// Requests about a share's namespace and contents (owner side serves them).
const (
	OpShares    Op = 0x10 // list the shares this peer may use
	OpStat      Op = 0x11 // attributes of one path
	OpReadDir   Op = 0x12 // entries of a directory with their attributes
	OpRead      Op = 0x13 // one range of a file
	OpGet       Op = 0x14 // a file as a push stream with credit, ending in its hash
	OpStatfs    Op = 0x15 // capacity and free space of the filesystem holding a share
	OpGetXattr  Op = 0x16 // one extended attribute's value
	OpListXattr Op = 0x17 // the names of a file's extended attributes
	OpWatch     Op = 0x18 // subscribe to a share's changes: EVENTS frames until CANCEL
	OpStream    Op = 0x19 // a range of a file as a push stream with credit, without a hash
	// OpList is READDIR whose reply frames flow under the opener's credit, so a listing of
	// any length never queues more than a window at the opener. A peer that does not know it
	// refuses it with UNSUPPORTED; the opener then falls back to READDIR.
	OpList Op = 0x1A
)

// Exchange frame of a WATCH subscription.
const (
	OpEvents Op = 0x0D // a batch of change events, sent by the owner inside a WATCH exchange
)

// Requests that change a share.
const (
	OpPut         Op = 0x20 // upload a file as a stream; committed after its hash matches
	OpMkdir       Op = 0x21
	OpSymlink     Op = 0x22
	OpSetAttr     Op = 0x23 // mode, times, size
	OpCreate      Op = 0x24 // create (or open) a regular file
	OpWrite       Op = 0x25 // write bytes at an offset
	OpUnlink      Op = 0x26
	OpRmdir       Op = 0x27
	OpRename      Op = 0x28 // with RENAME_NOREPLACE and RENAME_EXCHANGE
	OpLink        Op = 0x29 // hard link
	OpSetXattr    Op = 0x2A
	OpRemoveXattr Op = 0x2B
	OpFallocate   Op = 0x2C
	OpFsync       Op = 0x2D
	OpMknod       Op = 0x2E // FIFO, socket or device node (version 4)
	OpApply       Op = 0x2F // a mount's journal of changes, applied in order, once each
)

// Requests between the two devices themselves, about their link rather than a share.
const (
	// OpPunch exchanges direct-path candidates over a relayed link, then both sides punch
	// (internal/punch). A peer that does not know it refuses it with UNSUPPORTED.
	OpPunch Op = 0x30
)

var opNames = map[Op]string{
	OpHello: "HELLO", OpPing: "PING", OpPong: "PONG", OpClose: "CLOSE",
	OpCancel: "CANCEL", OpCredit: "CREDIT", OpError: "ERROR", OpData: "DATA", OpEnd: "END",
	OpShares: "SHARES", OpStat: "STAT", OpReadDir: "READDIR", OpRead: "READ", OpGet: "GET",
	OpPut: "PUT", OpMkdir: "MKDIR", OpSymlink: "SYMLINK", OpSetAttr: "SETATTR",
	OpStatfs: "STATFS", OpGetXattr: "GETXATTR", OpListXattr: "LISTXATTR", OpWatch: "WATCH",
	OpStream: "STREAM", OpList: "LIST", OpApply: "APPLY",
	OpEvents: "EVENTS", OpCreate: "CREATE", OpWrite: "WRITE", OpUnlink: "UNLINK", OpRmdir: "RMDIR",
	OpRename: "RENAME", OpLink: "LINK", OpSetXattr: "SETXATTR", OpRemoveXattr: "REMOVEXATTR",
	OpFallocate: "FALLOCATE", OpFsync: "FSYNC", OpMknod: "MKNOD",
	OpPunch: "PUNCH",
}

// Ops lists every opcode this version defines, in numeric order.
func Ops() []Op {
	var ops []Op
	for i := 0; i < 256; i++ {
		if _, ok := opNames[Op(i)]; ok {
			ops = append(ops, Op(i))
		}
	}
	return ops
}

// Known reports whether this version defines op.
func (op Op) Known() bool { _, ok := opNames[op]; return ok }

// IsRequest reports whether op opens an exchange.
func (op Op) IsRequest() bool { return op >= OpShares && op.Known() }

func (op Op) String() string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return fmt.Sprintf("OP_%#02x", uint8(op))
}
