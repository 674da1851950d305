// Package verify runs a patch in a container of an instance image the way
// upstream SWE-bench v4.1.0's run_instance does (BuildKit or another Engine),
// checks the image for leaked history, and grades the log with package
// grading.
package verify
