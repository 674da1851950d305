//go:build !unix

package grading

import "testing"

type cpuMeter struct{}

func startCPU() cpuMeter             { return cpuMeter{} }
func (m cpuMeter) report(*testing.B) {}
