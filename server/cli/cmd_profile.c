/*
 * cmd_profile.c - `pdbsym profile --pid N`: profiles a running .NET process
 * over its diagnostic socket (server/profile/profile.h), one profile per
 * window written into a folder, until the duration passes, SIGINT or SIGTERM
 * (the session stopped, the last window written), or the process exits.
 * On a terminal, a progress line on stderr.
 *
 * Exit status: 0 profiled (stopped, the duration passed, or the process
 * exited: every window written), 1 the cache could not be opened or a window
 * not written, 2 usage error, 3 the process could not be attached to (one
 * line on stderr saying why and what to do).
 */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "profile.h"
#include "settings.h"

static void profile_usage(FILE *out) {
  fprintf(out,
          "usage: pdbsym profile --pid N [OPTIONS]\n"
          "       pdbsym profile --listen PATH [OPTIONS]\n\n"
          "Attaches to a running .NET process over its diagnostic socket and writes one\n"
          "profile per window: every sample's stack with each frame named and, where the\n"
          "PDB has them, its file and line (docs/profiling.md).  Runs until the duration\n"
          "passes, Ctrl-C or SIGTERM (the last, partial window is written), or the process\n"
          "exits.  Attaching needs the process's user, or root.\n\n"
          "  --pid N           the process to profile\n"
          "  --listen PATH     instead: listen on the socket PATH and profile the first\n"
          "                    runtime started with DOTNET_DiagnosticPorts=PATH (or\n"
          "                    PATH,nosuspend) that dials it; a 'suspend' runtime is\n"
          "                    resumed once its session runs, so its startup is in the\n"
          "                    first window\n"
          "  --window D        each profile's length (default: the profile_window setting,\n"
          "                    60s; 250ms to 1h: 500ms, 10s, 2m)\n"
          "  --duration D      stop after this long (default: run until stopped)\n"
          "  --out DIR         folder for the windows (default: profile_dir,\n"
          "                    .pdbsym-profiles); files pdbsym-PID-TIME-N.speedscope.json\n"
          "                    and .pb.gz, written whole, the oldest removed past\n"
          "                    profile_max_files (1000) or profile_max_bytes (1G)\n"
          "  --format F        speedscope (default), pprof, or speedscope,pprof\n"
          "  --pdb-dir DIR     look for PDBs (NAME.pdb) and assemblies here first, then\n"
          "                    beside each module, then the cache and symbol servers;\n"
          "                    may be given up to %d times\n"
          "  --tee FILE        also copy the session's event stream to FILE, a .nettrace\n"
          "                    file `pdbsym trace` and TraceEvent read (the session then\n"
          "                    runs a rundown when it stops, so the copy names every frame)\n"
          "  --quiet           no progress line on a terminal\n"
          "%s\n"
          "Exit status: 0 profiled until stopped (every window written), 1 the cache could\n"
          "not be opened or a window not written, 2 usage error, 3 the process could not\n"
          "be attached to (the reason on stderr).\n",
          PROF_MAX_PDB_DIRS, settings_help());
}

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

typedef struct {
  bool tty;
  uint64_t window_ms;
} tick_state;

static void on_tick(void *ctx, const prof_status *st) {
  tick_state *t = ctx;
  if (!t->tty)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  double in = now > st->window_start_ns ? (double)(now - st->window_start_ns) / 1e9 : 0;
  fprintf(stderr,
          "\r  pid %d %s: window %llu (%.0f of %.0f s), %llu samples, %llu dropped events, "
          "%llu windows written, RSS %.1f MiB   ",
          st->pid, st->state, (unsigned long long)st->windows + 1, in,
          (double)t->window_ms / 1000.0, (unsigned long long)st->window_samples,
          (unsigned long long)st->dropped_events, (unsigned long long)st->windows,
          (double)prof_self_rss() / 1048576.0);
}

int cmd_profile(int argc, char **argv) {
  settings set;
  settings_init(&set, argc, argv);
  long pid = 0;
  uint64_t window_ms = set.cfg.profile_window, duration_ms = 0;
  const char *out_dir = set.cfg.profile_dir, *tee = NULL;
  unsigned formats = PROF_SPEEDSCOPE;
  bool quiet = false;
  const char *listen_path = NULL;
  const char *pdb_dirs[PROF_MAX_PDB_DIRS];
  int npdb = 0;
  for (int i = 1; i < argc; i++) {
    int used = settings_flag(&set, argc, argv, &i);
    if (used < 0)
      return 2;
    if (used > 0)
      continue;
    const char *a = argv[i];
    bool has_value = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      profile_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--pid") && has_value) {
      char *end;
      errno = 0;
      pid = strtol(argv[++i], &end, 10);
      if (errno || *end || pid <= 0 || pid > 0x3fffffff) {
        fprintf(stderr, "pdbsym profile: --pid '%s': a process id (a positive number)\n",
                argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--listen") && has_value) {
      listen_path = argv[++i];
    } else if ((!strcmp(a, "--window") || !strcmp(a, "--duration")) && has_value) {
      uint64_t ms;
      if (!cfg_parse_duration_ms(argv[i + 1], &ms) || ms == 0) {
        fprintf(stderr, "pdbsym profile: %s '%s': a duration such as 500ms, 10s, 2m, 1h\n", a,
                argv[i + 1]);
        return 2;
      }
      if (!strcmp(a, "--window"))
        window_ms = ms;
      else
        duration_ms = ms;
      i++;
    } else if (!strcmp(a, "--out") && has_value) {
      out_dir = argv[++i];
    } else if (!strcmp(a, "--format") && has_value) {
      if (!settings_profile_formats(argv[++i], &formats)) {
        fprintf(stderr, "pdbsym profile: --format '%s': speedscope, pprof or speedscope,pprof\n",
                argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--pdb-dir") && has_value) {
      if (npdb == PROF_MAX_PDB_DIRS) {
        fprintf(stderr, "pdbsym profile: at most %d --pdb-dir\n", PROF_MAX_PDB_DIRS);
        return 2;
      }
      pdb_dirs[npdb++] = argv[++i];
    } else if (!strcmp(a, "--tee") && has_value) {
      tee = argv[++i];
    } else if (!strcmp(a, "--quiet")) {
      quiet = true;
    } else if (a[0] == '-') {
      fprintf(stderr, "pdbsym profile: unknown option '%s'; run 'pdbsym profile --help'\n", a);
      return 2;
    } else {
      fprintf(stderr, "pdbsym profile: unexpected argument '%s' (the process is --pid N)\n", a);
      return 2;
    }
  }
  if (!pid == !listen_path) {
    fprintf(stderr, "pdbsym profile: which process? --pid N, or --listen PATH (run 'pdbsym "
                    "profile --help')\n");
    return 2;
  }
  if (window_ms < 250 || window_ms > 3600000) {
    fprintf(stderr, "pdbsym profile: a window of %llu ms: 250ms to 1h\n",
            (unsigned long long)window_ms);
    return 2;
  }
#ifdef __GLIBC__
  /* as serve does (http.c): tables of 128 KiB and more are mapped, and given
   * back when freed, instead of glibc raising its threshold after the first
   * big free and keeping them in its heaps; a process profiled for weeks
   * must not keep its busiest window's memory */
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 256 * 1024);
#endif
  if (!getenv("PDBSYM_LOG_LEVEL"))
    log_set_level("warn");
  else
    log_set_level(set.cfg.log_level);

  ps_diag d;
  ps_diag_clear(&d);
  char msg[512];
  prof_options po;
  settings_profile_options(&set.cfg, &po);
  po.window_ms = window_ms;
  po.duration_ms = duration_ms;
  po.formats = formats;
  po.tee_path = tee;
  for (int i = 0; i < npdb; i++)
    po.pdb_dirs[i] = pdb_dirs[i];
  po.npdb_dirs = npdb;

  /* the signals stop the session, not the process; poll(2) is interrupted */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  /* attach first: a process that cannot be profiled leaves no folder behind */
  prof_session *s = NULL;
  prof_port *port = NULL;
  ps_err ae;
  if (listen_path) { /* the first runtime that dials in */
    if (prof_port_open(listen_path, 0, &port, &d) != PS_E_OK) {
      fprintf(stderr, "pdbsym profile: %s\n", d.detail);
      return 3;
    }
    fprintf(stderr, "pdbsym profile: waiting on %s for a runtime started with "
                    "DOTNET_DiagnosticPorts=%s\n",
            listen_path, listen_path);
    uint8_t cookie[16];
    uint64_t rpid = 0;
    uint64_t until = duration_ms ? ds_now_ms() + duration_ms : UINT64_MAX;
    bool got = false;
    while (!got && !stop_flag && ds_now_ms() < until)
      got = prof_port_next(port, ds_now_ms() + 250, cookie, &rpid);
    if (!got) {
      prof_port_close(port);
      fprintf(stderr, "pdbsym profile: no runtime dialed %s\n", listen_path);
      return stop_flag ? 0 : 3;
    }
    ds_target t;
    ae = prof_port_target(port, cookie, rpid, &t, &d);
    if (!ae)
      ae = prof_attach_target(&po, &t, NULL, &s, &d); /* (t is the session's from here) */
  } else {
    ae = prof_attach(&po, (int)pid, NULL, &s, &d);
  }
  if (ae != PS_E_OK) {
    prof_port_close(port);
    /* the reasons found by looking at the process say it all; the others
     * name what was wrong in which answer */
    if (d.where && !strcmp(d.where, "attach"))
      fprintf(stderr, "pdbsym profile: %s\n", d.detail);
    else
      fprintf(stderr, "pdbsym profile: %s%ld: %s\n", listen_path ? "the runtime on " : "pid ",
              pid, ps_diag_format(&d, msg, sizeof msg));
    return 3;
  }
  prof_outdir *od = NULL;
  engine *eng = NULL;
  if (prof_outdir_open(out_dir, set.cfg.profile_max_files, set.cfg.profile_max_bytes, &od, &d) !=
      PS_E_OK) {
    fprintf(stderr, "pdbsym profile: %s\n", ps_diag_format(&d, msg, sizeof msg));
    prof_close(s);
    prof_port_close(port);
    return 1;
  }
  engine_config ec;
  settings_engine_config(&set, &ec);
  if (engine_open(&ec, &eng, &d) != PS_E_OK) {
    fprintf(stderr, "pdbsym profile: cannot open the cache in %s: %s\n", ec.cache_dir,
            ps_diag_format(&d, msg, sizeof msg));
    prof_close(s);
    prof_outdir_close(od);
    prof_port_close(port);
    return 1;
  }
  prof_set_engine(s, eng);
  prof_set_outdir(s, od);
  prof_pusher *pusher = NULL;
  if (set.cfg.profile_push[0]) { /* each window to the profile store too */
    prof_push_config pc;
    settings_profile_push(&set.cfg, &pc);
    if (prof_pusher_start(&pc, &pusher, &d) != PS_E_OK) {
      fprintf(stderr, "pdbsym profile: %s\n", d.detail);
      prof_close(s);
      prof_port_close(port);
      engine_close(eng);
      prof_outdir_close(od);
      return 2;
    }
    prof_set_pusher(s, pusher);
  }
  int status = 0;
  tick_state ts = {!quiet && isatty(2), window_ms};
  prof_status st;
  prof_get_status(s, &st);
  fprintf(stderr, "pdbsym profile: attached to pid %d (%s, .NET %s, CollectTracing%d); "
                  "windows of %.3g s into %s\n",
          st.pid, st.comm, st.clr_version[0] ? st.clr_version : "?", st.collect_version,
          (double)window_ms / 1000.0, out_dir);
  ps_err e = prof_run(s, &stop_flag, on_tick, &ts, &d);
  if (ts.tty)
    fputc('\n', stderr);
  prof_get_status(s, &st);
  if (e != PS_E_OK) {
    fprintf(stderr, "pdbsym profile: pid %d: %s\n", st.pid, ps_diag_format(&d, msg, sizeof msg));
    status = 1;
  }
  printf("profile: pid %d %s: %llu windows in %s (last %s), %llu samples, %llu events "
         "dropped by the runtime\n",
         st.pid, st.end_reason, (unsigned long long)st.windows, out_dir,
         st.last_stem[0] ? st.last_stem : "none", (unsigned long long)st.samples,
         (unsigned long long)st.dropped_events);
  prof_close(s);
  prof_port_close(port);
  prof_pusher_stop(pusher, set.cfg.profile_ipc_timeout * 1000); /* the last windows sent */
  engine_close(eng);
  prof_outdir_close(od);
  return status;
}
