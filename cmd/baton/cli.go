package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/nearest"
)

// cli is one invocation of the command line: where it writes and the exit
// status its command returned.
type cli struct {
	stdout, stderr io.Writer
	code           int
}

// newRoot builds the command tree of baton. Every command parses its flags
// with pflag (flags before or after the positional arguments; "--" ends
// them), prints its own help text for -h, --help and "baton help COMMAND",
// and reports a flag mistake with what to type instead. cobra adds
// "baton completion bash|zsh|fish" and the hidden __complete command the
// completion scripts call.
func newRoot(c *cli) *cobra.Command {
	root := &cobra.Command{
		Use:           "baton",
		Long:          mainUsage,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	cobraHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if cmd.Annotations[helpAnnotation] == "" {
			cobraHelp(cmd, args) // cobra's own commands (completion)
			return
		}
		c.printHelp(cmd)
	})
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &flagError{msg: flagErrorText(cmd.Flags(), commandName(cmd), err, otherFlags(cmd))}
	})
	root.SetHelpCommand(c.helpCommand(root))

	root.AddCommand(
		c.serveCommand(baton.RoleAll), c.serveCommand(baton.RoleScheduler), c.serveCommand(baton.RoleWorker),
		subcommand(c, "dev", devHelp, nil, defineDev, runDev),
		subcommand(c, "validate", validateHelp, nil, defineValidate, runValidate),
		subcommand(c, "next", nextHelp, nil, defineNext, runNext),
		subcommand(c, "status", statusHelp, nil, defineConfigJSON, runStatus),
		subcommand(c, "history", historyHelp, jobNames(1, nil), defineHistory, runHistory),
		subcommand(c, "ticks", ticksHelp, jobNames(1, withTicks), defineTicks, runTicks),
		subcommand(c, "locks", locksHelp, nil, defineConfigJSON, runLocks),
		subcommand(c, "trigger", triggerHelp, jobNames(0, withTicks), defineTrigger, runTrigger),
		subcommand(c, "backfill", backfillHelp, jobNames(1, withTicks), defineBackfill, runBackfill),
		subcommand(c, "pause", pauseHelp, jobNames(0, withTicks), pauseFlags(true), runPause),
		subcommand(c, "resume", pauseHelp, jobNames(0, withTicks), pauseFlags(false), runPause),
		subcommand(c, "skip", skipHelp, jobNames(1, withTicks), defineSkip, runSkip),
		c.schedulesCommand(),
		c.calendarsCommand(),
		c.lockCommand(),
		subcommand(c, "init", initHelp, nil, defineInit, runInit),
		subcommand(c, "version", versionHelp, nil, func(*flagSet) struct{} { return struct{}{} }, runVersion),
	)
	if next, _, err := root.Find([]string{"next"}); err == nil {
		_ = next.RegisterFlagCompletionFunc("job", jobNames(-1, withTicks))
		_ = next.RegisterFlagCompletionFunc("dst", cobra.FixedCompletions([]cobra.Completion{"vixie", "once", "skip", "both"}, cobra.ShellCompDirectiveNoFileComp))
	}
	return root
}

// commandName is cmd's name after "baton ": "status", "schedules put".
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), "baton ")
}

// helpAnnotation marks baton's own commands, whose help text is theirs.
const helpAnnotation = "baton-help"

// subcommand builds "baton NAME": define adds the flags and returns where
// their values land; runCmd runs the command with the positional arguments
// and returns the exit status. complete completes the positional arguments
// (nil: none). The flags that read an environment variable read it before
// runCmd runs.
func subcommand[O any](c *cli, name, help string, complete cobra.CompletionFunc,
	define func(fs *flagSet) O, runCmd func(fs *flagSet, o O, args []string, stdout, stderr io.Writer) int,
) *cobra.Command {
	cmd := &cobra.Command{
		Use:               name,
		Long:              help,
		Annotations:       map[string]string{helpAnnotation: name},
		ValidArgsFunction: complete,
	}
	if complete == nil {
		cmd.ValidArgsFunction = cobra.NoFileCompletions
	}
	fs := wrapFlags(name, cmd.Flags())
	o := define(fs)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := fs.applyEnv(); err != nil {
			c.code = usageExit(name, err, c.stderr)
			return nil
		}
		c.code = runCmd(fs, o, args, c.stdout, c.stderr)
		return nil
	}
	return cmd
}

// groupCommand is "baton GROUP" with its subcommands, each made by
// subcommand under the name "GROUP VERB": alone, or with a verb it does not
// have, it prints which it has and help, and exits 2.
func (c *cli) groupCommand(group, help string, subs ...*cobra.Command) *cobra.Command {
	verbs := make([]string, len(subs))
	for i, sc := range subs {
		sc.Use = strings.TrimPrefix(sc.Use, group+" ")
		verbs[i] = sc.Name()
	}
	list := verbs[0]
	if n := len(verbs); n > 1 {
		list = strings.Join(verbs[:n-1], ", ") + " or " + verbs[n-1]
	}
	cmd := &cobra.Command{
		Use:               group,
		Long:              help,
		Annotations:       map[string]string{helpAnnotation: group},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(_ *cobra.Command, args []string) error {
			msg := "name what to do: " + list
			if len(args) > 0 {
				msg = fmt.Sprintf("unknown subcommand %q: %s", args[0], list)
			}
			printf(c.stderr, "baton %s: %s\n%s", group, msg, help)
			c.code = exitUsage
			return nil
		},
	}
	cmd.AddCommand(subs...)
	return cmd
}

// printHelp prints cmd's help text and, when it ends with "flags:", its
// flags.
func (c *cli) printHelp(cmd *cobra.Command) {
	fmt.Fprint(c.stdout, cmd.Long)
	if strings.HasSuffix(cmd.Long, "flags:\n") {
		fmt.Fprint(c.stdout, cmd.LocalFlags().FlagUsages())
	}
}

// helpCommand is "baton help [COMMAND]".
func (c *cli) helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:         "help [COMMAND]",
		Annotations: map[string]string{helpAnnotation: "help"},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			for _, sub := range root.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		Run: func(_ *cobra.Command, args []string) {
			if len(args) == 0 || args[0] == "help" {
				fmt.Fprint(c.stdout, mainUsage)
				return
			}
			sub, _, err := root.Find(args)
			if err != nil || sub == root {
				fmt.Fprintf(c.stderr, "baton help: unknown command %q\n", args[0])
				fmt.Fprint(c.stderr, mainUsage)
				c.code = exitUsage
				return
			}
			sub.InitDefaultHelpFlag()
			sub.HelpFunc()(sub, nil)
		},
	}
}

// flagError is a flag the command does not take, or a bad flag value: a
// usage error, reported with the command's usage line.
type flagError struct{ msg string }

// Error returns the message.
func (e *flagError) Error() string { return e.msg }

// flagErrorText says what is wrong with a flag of "baton NAME" and what to
// type instead: the flag of the command nearest in spelling, else the
// command that has such a flag (other maps flag names to the commands that
// take them), else the command's flags.
func flagErrorText(fs *pflag.FlagSet, name string, err error, other map[string][]string) string {
	var ne *pflag.NotExistError
	var ve *pflag.InvalidValueError
	var re *pflag.ValueRequiredError
	switch {
	case errors.As(err, &ne):
		given := "--" + ne.GetSpecifiedName()
		if strings.HasPrefix(ne.Error(), "unknown shorthand") {
			given = "-" + ne.GetSpecifiedShortnames()
		}
		msg := "unknown flag " + given + " for baton " + name
		var names []string
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				names = append(names, f.Name)
			}
		})
		typed := strings.TrimLeft(given, "-")
		if typed, _, _ = strings.Cut(typed, "="); len(typed) > 0 {
			if near := nearest.Name(typed, names); near != "" {
				return msg + "; did you mean --" + near + "?"
			}
			if cmds := other[typed]; len(cmds) > 0 {
				return msg + "; --" + typed + " is a flag of " + strings.Join(cmds, ", ")
			}
		}
		if len(names) == 0 {
			return msg + "; it takes no flags"
		}
		return msg + "; its flags are --" + strings.Join(names, ", --")
	case errors.As(err, &ve):
		return fmt.Sprintf("invalid value %q for --%s: %v", ve.GetValue(), ve.GetFlag().Name, errors.Unwrap(ve))
	case errors.As(err, &re):
		f := re.GetFlag()
		value, _ := pflag.UnquoteUsage(f)
		return fmt.Sprintf("flag --%s needs a value: --%s %s", f.Name, f.Name, value)
	}
	return err.Error()
}

// otherFlags maps each flag name of cmd's sibling commands to them, as
// they are typed ("baton schedules put").
func otherFlags(cmd *cobra.Command) map[string][]string {
	out := map[string][]string{}
	if !cmd.HasParent() {
		return out
	}
	for _, sib := range cmd.Parent().Commands() {
		if sib == cmd {
			continue
		}
		sib.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && !slices.Contains(out[f.Name], sib.CommandPath()) {
				out[f.Name] = append(out[f.Name], sib.CommandPath())
			}
		})
	}
	return out
}

// noJob is the usage error of a job name the config at path does not
// have, with what it was probably meant to be.
func noJob(c *baton.Cluster, job, path string) error {
	if hint := c.UnknownJobHint(job); hint != "" {
		return usagef("no job %q in %s: %s", job, path, hint)
	}
	return usagef("no job %q in %s", job, path)
}

// usageLine returns the usage lines of "baton NAME" from its help text:
// each of its forms among the lines of the help's usage block (the
// "usage:" line and the indented ones under it).
func usageLine(name, help string) string {
	var out []string
	inBlock := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(line, "usage:"):
			inBlock = true
		case !inBlock:
			continue
		case strings.TrimSpace(line) == "":
			inBlock = false
			continue
		}
		text := strings.TrimSpace(strings.TrimPrefix(line, "usage:"))
		if rest, ok := strings.CutPrefix(text, "baton "+name); ok && (rest == "" || rest[0] == ' ') {
			prefix := "usage: "
			if len(out) > 0 {
				prefix = "       "
			}
			out = append(out, prefix+text)
		}
	}
	if len(out) > 0 {
		return strings.Join(out, "\n")
	}
	return "usage: baton " + name
}

// goStyleFlags turns the single-dash long flags the Go flag package
// accepted (-config FILE) into pflag's --config FILE, for the long flags fs
// defines, up to "--".
func goStyleFlags(fs *pflag.FlagSet, args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && fs.Lookup(name) != nil {
				out[i] = "-" + a
			}
		}
	}
	return out
}
