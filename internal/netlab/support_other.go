//go:build !linux

package netlab

import "os"

func unsupported() string { return "network namespaces exist only on Linux" }

func processAlive(int) bool { return true }

var interrupt = os.Interrupt
