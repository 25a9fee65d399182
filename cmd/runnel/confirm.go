package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

var errNotConfirmed = errors.New("not confirmed: nothing deleted")

// confirm asks question on stderr and reads the answer from stdin when stdin
// is a terminal; anything but y or yes declines. Without a terminal (a
// script, a pipe) there is no one to ask, so it refuses and names --yes.
func confirm(cmd *cobra.Command, question string) error {
	in := cmd.InOrStdin()
	if !isTerminal(in) {
		return errors.New("refusing to delete without confirmation: stdin is not a terminal (add --yes)")
	}
	fmt.Fprint(cmd.ErrOrStderr(), question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
