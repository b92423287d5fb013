//go:build !linux

package main

// runContainChild has no modes outside Linux, where the containment tests do not run.
func runContainChild(string, []string) (int, bool) { return 0, false }
