// A statically linked copy program, as restic and rclone do I/O (built by
// run_programs.rs with CGO_ENABLED=0): `gocopy IN OUT` copies with
// io.Copy (copy_file_range where the kernel can), `gocopy -rw IN OUT`
// with a read/write loop of 1 MiB; `-` is stdin or stdout.
package main

import (
	"io"
	"os"
)

func open(name string, out bool) *os.File {
	if name == "-" {
		if out {
			return os.Stdout
		}
		return os.Stdin
	}
	var f *os.File
	var err error
	if out {
		f, err = os.Create(name)
	} else {
		f, err = os.Open(name)
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	return f
}

func main() {
	args := os.Args[1:]
	loop := len(args) > 0 && args[0] == "-rw"
	if loop {
		args = args[1:]
	}
	if len(args) != 2 {
		os.Stderr.WriteString("usage: gocopy [-rw] IN OUT\n")
		os.Exit(2)
	}
	in, out := open(args[0], false), open(args[1], true)
	var err error
	if loop {
		_, err = io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, make([]byte, 1<<20))
	} else {
		_, err = io.Copy(out, in)
	}
	if err == nil {
		err = out.Close()
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}
