/*
 * dsock.h - talking to a .NET runtime's diagnostic server: finding its
 * socket, connecting, and the commands pdbsym sends (the messages themselves
 * are parsers/dsipc.h).  Every connect, read and write has a deadline.
 *
 * Finding the socket of pid (what `dotnet-trace -p` does, made to work from
 * a sidecar too): the runtime listens on
 *     $TMPDIR/dotnet-diagnostic-{pid}-{start}-socket
 * where TMPDIR is the target's own (read from /proc/PID/environ, else /tmp),
 * pid is the target's pid in its own pid namespace (the last NSpid field of
 * /proc/PID/status) and start its start time in clock ticks since boot
 * (field 22 of /proc/PID/stat).  The folder is reached through
 * /proc/PID/root, so a target in another mount namespace (a container) is
 * found the same way.  The socket is connected through
 * /proc/self/fd/DIRFD/NAME, which keeps the path under sun_path's 108 bytes
 * whatever the folder's length.
 *
 * Each command takes a connection of its own (the runtime closes it after
 * answering, or streams a session's events on it); a target is "dialed" for
 * each.  A target that dials pdbsym instead (DOTNET_DiagnosticPorts) gives
 * its connections through ds_target.dial (server/profile/).
 */
#ifndef PDBSYM_DSOCK_H
#define PDBSYM_DSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dsipc.h"
#include "error.h"

/* CLOCK_MONOTONIC milliseconds */
uint64_t ds_now_ms(void);

typedef struct ds_target ds_target;
struct ds_target {
  int pid;              /* as this process sees it (0: only known by its advertise) */
  int ns_pid;           /* in the target's own pid namespace */
  uid_t uid;            /* the target's (for messages) */
  char comm[64];        /* its command name, from /proc/PID/comm */
  char sock_dir[1024];  /* the folder holding the socket, as the target sees it */
  char sock_name[128];
  int dir_fd;           /* O_PATH fd of the folder through /proc/PID/root, or -1 */
  /* a connection to the runtime's diagnostic server, or -1 with d set */
  int (*dial)(ds_target *t, uint64_t deadline_ms, ps_diag *d);
  void *dial_ctx;
  bool owns_ctx;         /* dial_ctx is freed by ds_target_close */
  bool via_port;         /* it dialed pdbsym (a diagnostic port): pid is the runtime's own,
                            maybe of another pid namespace, so /proc is not looked at */
  uint32_t last_hresult; /* of the last error reply */
};

/* Finds pid's diagnostic socket.  The error says why there is none, and what
 * to do: no such process; not a .NET process (libcoreclr.so not loaded);
 * diagnostics turned off (DOTNET_EnableDiagnostics=0); another user's
 * process that this one may not look into; no socket in the folder.  A
 * process younger than wait_ms that has no socket yet (still starting) is
 * looked at again until it has one or is wait_ms old. */
ps_err ds_target_find(int pid, ds_target *t, uint64_t wait_ms, ps_diag *d);
void ds_target_close(ds_target *t);
/* Seconds since process pid started; -1 when not known. */
double ds_process_age(int pid);

/* Bytes to and from a connection, non-blocking fds, until deadline_ms;
 * PS_E_TIMEOUT past it, PS_E_NETWORK when the peer closed or failed. */
ps_err ds_send_all(int fd, const void *p, size_t n, uint64_t deadline_ms, ps_diag *d);
ps_err ds_recv_all(int fd, void *p, size_t n, uint64_t deadline_ms, ps_diag *d);

/* One command's round trip on a new connection: msg sent, the reply's
 * header and payload (at most cap bytes; a longer payload is PS_E_LIMIT) read.
 * *fd_out, when not NULL, keeps the connection open (a session's stream);
 * else it is closed. */
ps_err ds_command(ds_target *t, const uint8_t *msg, size_t len, uint64_t timeout_ms,
                  ds_header *h, uint8_t *payload, size_t cap, size_t *got, int *fd_out,
                  ps_diag *d);

/* ProcessInfo3, else ProcessInfo2, else ProcessInfo (a runtime that does not
 * know the newer one answers DS_IPC_E_UNKNOWN_COMMAND); *kind the one used. */
ps_err ds_ask_process_info(ds_target *t, uint64_t timeout_ms, ds_process_info *out, int *kind,
                       ps_diag *d);

/* Starts an EventPipe session streamed on a new connection (*fd, non-blocking):
 * CollectTracing<newest> (2-5), falling back to older ones down to 2 while the runtime answers
 * unknown command or bad encoding (older runtimes); *version the one used.
 * A runtime that refuses all four is PS_E_UNSUPPORTED naming .NET 5 as the
 * oldest that pdbsym can profile. */
ps_err ds_start_collect(ds_target *t, const ds_collect *c, int newest, uint64_t timeout_ms,
                        int *fd, uint64_t *session, int *version, ps_diag *d);

/* StopTracing of session, on a new connection. */
ps_err ds_stop(ds_target *t, uint64_t session, uint64_t timeout_ms, ps_diag *d);

/* ResumeRuntime: a runtime suspended at startup (DiagnosticPorts "suspend")
 * goes on. */
ps_err ds_resume(ds_target *t, uint64_t timeout_ms, ps_diag *d);

#endif
