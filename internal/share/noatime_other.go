//go:build !linux

package share

const oNoatime = 0
