/*
 * cmd_serve.c - `pdbsym serve`: reads the settings (config.h), opens the
 * engine, serves HTTP (http.h) until SIGTERM or SIGINT, then lets the
 * requests in flight finish, closes every connection and the engine (and with
 * it the database) and exits 0.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "cli.h"
#include "config.h"
#include "engine.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "profile.h"
#include "settings.h"

static void log_warning(void *ctx, const char *msg) {
  (void)ctx;
  log_line l;
  log_begin(&l, LOG_WARN, msg);
  log_end(&l);
}

int cmd_serve(int argc, char **argv) {
  static srv_config cfg;
  char err[1024];
  int rc = cfg_load_warn(&cfg, argc, argv, err, sizeof err, log_warning, NULL);
  if (rc == 1)
    return 0;
  if (rc) {
    fprintf(stderr, "pdbsym serve: %s\n", err);
    return 2;
  }
  /* bounds and kinds are the settings table's (config.c); these relate two
   * settings or read a list */
  if (!log_set_level(cfg.log_level)) {
    fprintf(stderr, "pdbsym serve: bad setting log_level = '%s': want debug, info, warn or error\n",
            cfg.log_level);
    return 2;
  }
  if (!api_check_config(&cfg, err, sizeof err)) {
    fprintf(stderr, "pdbsym serve: bad setting %s\n", err);
    return 2;
  }
  settings_warn_folders(&cfg, log_warning, NULL);

  {
    prof_manager_config pc;
    settings_profile_config(&cfg, &pc);
    if (!prof_manager_check(&pc, err, sizeof err)) {
      fprintf(stderr, "pdbsym serve: %s\n", err);
      return 2;
    }
  }

  /* Block the stop signals before any thread starts, so every thread
   * inherits the mask and only sigwait below sees them. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  /* SIGHUP (a terminal closed, a supervisor's "reload") must not kill the
   * server: its default action would, at once, with requests in flight and
   * downloads' files left.  Logs go to stderr, so there is nothing to
   * reopen: it is noted and ignored. */
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  signal(SIGPIPE, SIG_IGN);

  engine_config ec;
  settings_engine_config_from(&cfg, &ec);
  ec.on_download = mt_download_cb;
  engine *eng = NULL;
  ps_diag diag;
  ps_diag_clear(&diag);
  ps_err e = engine_open(&ec, &eng, &diag);
  if (e != PS_E_OK) {
    char buf[512];
    log_line l;
    log_begin(&l, LOG_ERROR, "cannot open the engine");
    log_str(&l, "error", ps_diag_format(&diag, buf, sizeof buf));
    log_str(&l, "cache_dir", cfg.cache_dir);
    log_end(&l);
    return 1;
  }

  /* the processes the settings name for profiling (docs/profiling.md) */
  prof_manager_config pc;
  settings_profile_config(&cfg, &pc);
  prof_manager *pm = NULL;
  if (prof_manager_start(&pc, eng, &pm, &diag) != PS_E_OK) {
    char buf[512];
    log_line l;
    log_begin(&l, LOG_ERROR, "cannot start the profiler");
    log_str(&l, "error", ps_diag_format(&diag, buf, sizeof buf));
    log_str(&l, "profile_dir", cfg.profile_dir);
    log_end(&l);
    engine_close(eng);
    return 1;
  }

  static api a;
  a.eng = eng;
  a.cfg = &cfg;
  a.draining = 0;
  a.profiles = pm;
  http_server *srv = http_start(&a, &cfg, err, sizeof err);
  if (!srv) {
    log_line l;
    log_begin(&l, LOG_ERROR, "cannot start the HTTP server");
    log_str(&l, "error", err);
    log_end(&l);
    prof_manager_free(pm);
    engine_close(eng);
    return 1;
  }
  log_line l;
  log_begin_always(&l, LOG_INFO, "listening");
  log_str(&l, "listen", cfg.listen);
  log_int(&l, "port", (long long)http_port(srv));
  log_str(&l, "cache_dir", cfg.cache_dir);
  log_str(&l, "config_file", cfg.config_file[0] ? cfg.config_file : NULL);
  log_str(&l, "version", PDBSYM_VERSION);
  log_end(&l);

  int sig = 0;
  for (;;) {
    if (sigwait(&stop, &sig) != 0)
      continue; /* EINTR */
    if (sig != SIGHUP)
      break;
    log_begin_always(&l, LOG_INFO, "SIGHUP ignored (logs go to stderr: nothing to reopen)");
    log_end(&l);
  }
  log_begin_always(&l, LOG_INFO, "stopping");
  log_str(&l, "signal", sig == SIGINT ? "SIGINT" : "SIGTERM");
  log_end(&l);
  a.draining = 1;
  /* the whole shutdown within stop_timeout: each grace gets what is left */
  uint64_t budget = cfg.stop_timeout * 1000u, t0 = engine_now_ms();
  /* the profiled processes' sessions stopped and their last windows written
   * while the engine still names modules, then HTTP */
  prof_manager_stop(pm);
  http_stop(srv, (unsigned)cfg.shutdown_grace, budget);
  prof_manager_free(pm);
  uint64_t spent = engine_now_ms() - t0;
  engine_close_within(eng, spent < budget ? budget - spent : 0);
  log_begin_always(&l, LOG_INFO, "stopped");
  log_end(&l);
  return 0;
}
