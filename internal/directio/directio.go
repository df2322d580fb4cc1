// Package directio moves bulk file data around the page cache where that is cheaper: a
// sequential reader takes what the page cache already holds and reads the rest straight from
// the disk (O_DIRECT), and a bulk writer whose data no one reads back soon writes it straight
// to the disk. Both skip a copy and the allocation of page-cache pages, which on the machines
// of BENCHMARKS.md costs more than the copy itself; and a file streamed to a peer no longer
// evicts the owner's working set.
//
// O_DIRECT needs the file offset, the length and the memory address aligned to the device's
// block; Align is a multiple of every such block in use. Whatever is not aligned, and every
// filesystem that refuses O_DIRECT, takes the ordinary path, so callers never see a
// difference but in speed.
package directio

import "github.com/peerfs/peerfs/internal/chunkbuf"

// Align is the alignment this package asks of offsets, lengths and buffers for the direct
// path: the page size, which chunkbuf's buffers are aligned to.
const Align = chunkbuf.PageSize

func aligned(off int64, n int) bool { return off%Align == 0 && n%Align == 0 }

func roundUp(n int) int { return (n + Align - 1) &^ (Align - 1) }
