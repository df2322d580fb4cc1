// Package conformance checks that a peerfs mount answers system calls as the machine's own
// file system does. It has only tests: each case is one behaviour (create_test.go,
// attr_test.go, times_test.go, names_test.go, ops_test.go, special_test.go, owner_test.go),
// run twice in child processes, once in a fresh directory on the local disk (ext4 on Linux
// CI) and once in a fresh directory of a real read-write peerfs mount between two nodes on
// loopback; the observations of the two runs must be equal, line by line, so the expected
// answer is the kernel's own rather than a guess written into the test.
//
// A case records observations with its obs function: an errno name (errnoName), a mode, a
// size, a link count, or a relation between two timestamps (timeRel); never a raw timestamp
// or inode number, which differ between the two directories. Cases run in child processes
// (the test binary run again with the case named in its environment) so that they can run
// as another user and so that a call that blocks on the mount cannot deadlock the FUSE
// server serving it in the test process. Cases that run as another user need a mount that
// lets other users in; harness_test.go makes one when a case file sets allowOther.
//
// Run one family with, for example:
//
//	go test -count=1 -run 'TestConformance/create' ./internal/conformance/
package conformance
