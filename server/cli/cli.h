/*
 * cli.h - subcommands of the pdbsym binary.  Each takes (argc, argv) with
 * argv[0] the command name and returns the process exit status:
 * 0 success, 1 some work failed (or the service failed), 2 usage or input
 * error (unknown option, unreadable file, bad request), 130 interrupted.
 */
#ifndef PDBSYM_CLI_H
#define PDBSYM_CLI_H

typedef struct {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
} cli_command;

/* Once, from main before any setting is read (settings.c): every
 * symbol_path, from any place, is then checked as the fetch room reads it. */
void settings_setup(void);

int cmd_version(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_lookup(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_warm(int argc, char **argv);
int cmd_health(int argc, char **argv);
int cmd_fetch(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_symbolicate(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_profile(int argc, char **argv);

#endif
