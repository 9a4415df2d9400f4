package app

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main is the main function of a fleet binary. run gets a context that a
// SIGINT or SIGTERM cancels (the binary then shuts down gracefully), the
// command-line arguments and the environment (os.LookupEnv, so a variable
// set to empty can be told from an unset one); its error is printed as
// "name: err" and the process exits with status 1.
func Main(name string, run func(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
