//go:build !linux

package main

import "syscall"

// childAttributes: only Linux can tie a child's life to its parent's.
func childAttributes() *syscall.SysProcAttr { return nil }
