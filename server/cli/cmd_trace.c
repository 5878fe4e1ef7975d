/*
 * cmd_trace.c - `pdbsym trace FILE.nettrace [-o OUT] [--format F]`: a .NET
 * EventPipe trace symbolicated (engine/trace.h), written as speedscope JSON
 * (default), pprof, or a top-N text.  The modules' PDBs are looked for in the
 * folders given with --pdb-dir, beside the module's own path when that path
 * exists here, then through the engine (cache, symbol servers), by the GUID
 * and age the trace carries.  On a terminal, a progress line on stderr.
 *
 * Each sample weighs the time it stands for (trace.h); --state keeps the
 * samples of running or of waiting threads.  A trace recorded without what
 * a profile needs gets a warning on stderr naming it (trace_job_warning).
 *
 * Exit status: 0 written, 1 the cache could not be opened or the output not
 * written, 2 usage error or a trace that cannot be read (one line on stderr),
 * 3 written, but the profile says nothing useful (no samples, no method the
 * trace names), or with --strict any warning.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "settings.h"
#include "symfile.h"
#include "trace.h"

#define MAX_PDB_DIRS 16

static void trace_usage(FILE *out) {
  fprintf(out,
          "usage: pdbsym trace [OPTIONS] FILE.nettrace\n\n"
          "Reads a .NET EventPipe trace (dotnet-trace, dotnet-monitor,\n"
          "DOTNET_EnableEventPipe) and writes its CPU samples with every frame named\n"
          "and, where the PDB has them, its file and line.  Each sample weighs the\n"
          "time it stands for (thread time: running managed code, or waiting or in\n"
          "native code, as the runtime's sampler saw the thread).\n\n"
          "  -o, --output FILE     write there instead of standard output\n"
          "  --format F            speedscope (default; speedscope.app JSON, one sampled\n"
          "                        profile per thread), pprof (gzip'ed profile.proto),\n"
          "                        top (the frames with the most samples, as text)\n"
          "  --top N               rows of --format top (default %d)\n"
          "  --state S             all (default: both, each stack under a frame naming\n"
          "                        the state), running (samples of threads running\n"
          "                        managed code) or waiting (waiting or in native code)\n"
          "  --strict              exit 3 on any warning about the trace (what it\n"
          "                        lacks for a useful profile)\n"
          "  --pdb-dir DIR         look for PDBs (NAME.pdb) and assemblies here first\n"
          "                        (a ReadyToRun assembly's own maps give its\n"
          "                        precompiled frames their IL offsets; else the\n"
          "                        assembly at the path the trace names is read);\n"
          "                        may be given up to %d times\n"
          "  --stack-budget N      bytes of interned stacks kept in memory before they\n"
          "                        are spilled to disk (default: the trace_stack_budget\n"
          "                        setting, %zu MiB; K M G suffixes)\n"
          "  --code-budget N       bytes for the trace's methods, addresses and frames\n"
          "                        (default: trace_code_budget, %zu MiB)\n"
          "  --spill-dir DIR       folder for the spill file (default: trace_spill_dir,\n"
          "                        else $TMPDIR or /tmp)\n"
          "  --quiet               nothing on stderr but errors: no progress line, no\n"
          "                        warnings, no word on modules without symbols\n"
          "  --stats FILE          write the job's counters and memory peaks there (JSON)\n"
          "%s\n"
          "Exit status: 0 written, 1 the cache could not be opened or the output not\n"
          "written, 2 usage error or unreadable trace, 3 written but useless (no\n"
          "samples, no method named: see the warning) or, with --strict, any warning.\n",
          TRACE_DEFAULT_TOP, MAX_PDB_DIRS, TRACE_DEFAULT_STACK_BUDGET >> 20,
          TRACE_DEFAULT_CODE_BUDGET >> 20, settings_help());
}

typedef struct {
  const char *dirs[MAX_PDB_DIRS];
  int ndirs;
  bool quiet;
} local_dirs;

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* true when st is the PDB m names (Portable PDBs: the GUID; Windows: GUID and age) */
static bool same_pdb(const symtab *st, const module_id *m) {
  if (memcmp(st->ident.guid, m->guid, 16) != 0)
    return false;
  return st->ident.format == ST_FORMAT_PORTABLE || st->ident.age == m->age;
}

/* A candidate file: one that is not there, or not a symbol file (an image
 * without an embedded PDB, as every framework assembly is), is passed over
 * in silence; one that is another build's PDB is worth a word. */
static bool try_load(const local_dirs *ld, const char *pdb, const char *image,
                     const module_id *m, symtab *st) {
  if (!file_exists(pdb))
    return false;
  char why[1024];
  if (symfile_load_why(pdb, image && file_exists(image) ? image : NULL, st, why, sizeof why))
    return false;
  if (same_pdb(st, m))
    return true;
  if (!ld->quiet)
    fprintf(stderr, "pdbsym trace: %s is not the PDB the trace names (%s); skipped\n", pdb,
            m->debug_file);
  st_free(st);
  return false;
}

static bool local_lookup(void *ctx, const module_id *m, const char *il_path, symtab *st) {
  local_dirs *ld = ctx;
  char pdb[4096], img[4096];
  for (int i = 0; i < ld->ndirs; i++) {
    snprintf(pdb, sizeof pdb, "%s/%s", ld->dirs[i], m->debug_file);
    snprintf(img, sizeof img, "%s/%s", ld->dirs[i], m->code_file);
    if (try_load(ld, pdb, img, m, st))
      return true;
    if (*m->code_file && try_load(ld, img, NULL, m, st)) /* an embedded PDB */
      return true;
  }
  /* beside the module, when the trace was recorded on this machine */
  const char *slash = strrchr(il_path, '/');
  if (slash && slash != il_path && file_exists(il_path)) {
    snprintf(pdb, sizeof pdb, "%.*s/%s", (int)(slash - il_path), il_path, m->debug_file);
    if (try_load(ld, pdb, il_path, m, st))
      return true;
    if (try_load(ld, il_path, NULL, m, st))
      return true;
  }
  return false;
}

typedef struct {
  bool tty;
  double last;
  uint64_t total;
} progress_state;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void show_progress(void *ctx, const trace_stats *s) {
  progress_state *p = ctx;
  double t = now_s();
  if (t - p->last < 0.1)
    return;
  p->last = t;
  if (p->total)
    fprintf(stderr, "\r  %.1f / %.1f MiB (%3.0f%%), %llu samples, modules %llu/%llu   ",
            (double)s->bytes / 1048576.0, (double)p->total / 1048576.0,
            100.0 * (double)s->bytes / (double)p->total, (unsigned long long)s->samples,
            (unsigned long long)s->modules_found, (unsigned long long)s->modules_needed);
  else
    fprintf(stderr, "\r  %.1f MiB, %llu samples, modules %llu/%llu   ",
            (double)s->bytes / 1048576.0, (unsigned long long)s->samples,
            (unsigned long long)s->modules_found, (unsigned long long)s->modules_needed);
}

static ps_err write_file(void *ctx, const void *data, size_t len) {
  return fwrite(data, 1, len, (FILE *)ctx) == len ? PS_E_OK : PS_E_IO;
}

static int write_stats(const char *path, const trace_stats *s, const trace_options *o) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "pdbsym trace: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
#define U(x) (unsigned long long)(x)
  fprintf(f,
          "{\"bytes\":%llu,\"blocks\":%llu,\"events\":%llu,\"samples\":%llu,"
          "\"threads\":%llu,\"stacks\":%llu,\"stack_flushes\":%llu,\"spill_bytes\":%llu,"
          "\"addresses\":%llu,\"frames\":%llu,\"frames_with_line\":%llu,\"methods\":%llu,"
          "\"modules\":%llu,\"modules_needed\":%llu,\"modules_found\":%llu,"
          "\"peak_stack_bytes\":%llu,\"peak_window_bytes\":%llu,\"peak_code_bytes\":%llu,"
          "\"peak_read_bytes\":%llu,\"stack_budget\":%llu,\"samples_running\":%llu,"
          "\"samples_waiting\":%llu,\"samples_other\":%llu,\"interval_ns\":%llu,"
          "\"nominal_ns\":%llu,\"frames_line_approx\":%llu,\"r2r_images\":%llu,"
          "\"r2r_methods\":%llu}\n",
          U(s->bytes), U(s->blocks), U(s->events), U(s->samples), U(s->threads), U(s->stacks),
          U(s->stack_flushes), U(s->spill_bytes), U(s->addresses), U(s->frames),
          U(s->frames_with_line), U(s->methods), U(s->modules), U(s->modules_needed),
          U(s->modules_found), U(s->peak_stack_bytes), U(s->peak_window_bytes),
          U(s->peak_code_bytes), U(s->peak_read_bytes),
          U(o->stack_budget ? o->stack_budget : TRACE_DEFAULT_STACK_BUDGET),
          U(s->samples_running), U(s->samples_waiting), U(s->samples_other), U(s->interval_ns),
          U(s->nominal_ns), U(s->frames_line_approx), U(s->r2r_images), U(s->r2r_methods));
#undef U
  return fclose(f) == 0 ? 0 : 1;
}

int cmd_trace(int argc, char **argv) {
  settings set;
  settings_init(&set, argc, argv);
  const char *file = NULL, *outpath = NULL;
  trace_format fmt = TRACE_SPEEDSCOPE;
  trace_options opt;
  memset(&opt, 0, sizeof opt);
  local_dirs ld = {{0}, 0, false};
  bool quiet = false, strict = false;
  const char *stats_path = NULL;
  for (int i = 1; i < argc; i++) {
    int used = settings_flag(&set, argc, argv, &i);
    if (used < 0)
      return 2;
    if (used > 0)
      continue;
    const char *a = argv[i];
    bool has_value = i + 1 < argc;
    uint64_t n;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      trace_usage(stdout);
      return 0;
    } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has_value) {
      outpath = argv[++i];
    } else if (!strcmp(a, "--format") && has_value) {
      if (!trace_format_parse(argv[++i], &fmt)) {
        fprintf(stderr, "pdbsym trace: --format '%s': speedscope, pprof or top\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--state") && has_value) {
      if (!trace_state_parse(argv[++i], &opt.state)) {
        fprintf(stderr, "pdbsym trace: --state '%s': all, running or waiting\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--strict")) {
      strict = true;
    } else if (!strcmp(a, "--top") && has_value) {
      int t = atoi(argv[++i]);
      if (t <= 0 || t > 100000) {
        fprintf(stderr, "pdbsym trace: --top '%s': 1 to 100000\n", argv[i]);
        return 2;
      }
      opt.top = t;
    } else if (!strcmp(a, "--pdb-dir") && has_value) {
      if (ld.ndirs == MAX_PDB_DIRS) {
        fprintf(stderr, "pdbsym trace: at most %d --pdb-dir\n", MAX_PDB_DIRS);
        return 2;
      }
      ld.dirs[ld.ndirs++] = argv[++i];
    } else if ((!strcmp(a, "--stack-budget") || !strcmp(a, "--code-budget")) && has_value) {
      if (!settings_parse_bytes(argv[i + 1], &n) || n < 4096 || n > ((uint64_t)1 << 40)) {
        fprintf(stderr, "pdbsym trace: %s '%s': a size from 4K to 1T\n", a, argv[i + 1]);
        return 2;
      }
      if (!strcmp(a, "--stack-budget"))
        opt.stack_budget = (size_t)n;
      else
        opt.code_budget = (size_t)n;
      i++;
    } else if (!strcmp(a, "--spill-dir") && has_value) {
      opt.spill_dir = argv[++i];
    } else if (!strcmp(a, "--stats") && has_value) {
      stats_path = argv[++i];
    } else if (!strcmp(a, "--quiet")) {
      quiet = true;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "pdbsym trace: unknown option '%s'; run 'pdbsym trace --help'\n", a);
      return 2;
    } else if (!file) {
      file = a;
    } else {
      fprintf(stderr, "pdbsym trace: one trace at a time; got '%s' too\n", a);
      return 2;
    }
  }
  if (!file) {
    trace_usage(stderr);
    return 2;
  }
  /* the budgets' defaults are the service's settings (PDBSYM_TRACE_STACK_BUDGET, ...) */
  if (!opt.stack_budget)
    opt.stack_budget = (size_t)set.cfg.trace_stack_budget;
  if (!opt.code_budget)
    opt.code_budget = (size_t)set.cfg.trace_code_budget;
  ld.quiet = quiet;
  /* ReadyToRun maps: the images in the --pdb-dir folders, else at the path
   * the trace names, wherever it is (this machine's own files) */
  static const char *const any_path[] = {"/"};
  opt.image_dirs = ld.dirs;
  opt.nimage_dirs = (size_t)ld.ndirs;
  opt.image_roots = any_path;
  opt.nimage_roots = 1;
  opt.max_image_bytes = set.cfg.trace_image_max_bytes;
  if (!opt.spill_dir && set.cfg.trace_spill_dir[0])
    opt.spill_dir = set.cfg.trace_spill_dir;
  FILE *in = strcmp(file, "-") ? fopen(file, "rb") : stdin;
  if (!in) {
    fprintf(stderr, "pdbsym trace: cannot open %s: %s\n", file, strerror(errno));
    return 2;
  }
  if (!getenv("PDBSYM_LOG_LEVEL"))
    log_set_level("warn");
  else
    log_set_level(set.cfg.log_level);
  const char *slash = strrchr(file, '/');
  opt.name = slash ? slash + 1 : file;

  ps_diag d;
  ps_diag_clear(&d);
  char msg[512];
  trace_job *job = NULL;
  if (trace_job_open(&opt, &job, &d) != PS_E_OK) {
    fprintf(stderr, "pdbsym trace: %s\n", ps_diag_format(&d, msg, sizeof msg));
    if (in != stdin)
      fclose(in);
    return 1;
  }
  progress_state ps = {!quiet && isatty(2), 0, 0};
  struct stat sb;
  if (in != stdin && fstat(fileno(in), &sb) == 0)
    ps.total = (uint64_t)sb.st_size;
  if (ps.tty)
    trace_job_set_progress(job, show_progress, &ps);

  static uint8_t buf[1 << 16];
  int status = 0;
  for (;;) {
    size_t got = fread(buf, 1, sizeof buf, in);
    if (got && trace_job_feed(job, buf, got, &d) != PS_E_OK) {
      status = 2;
      break;
    }
    if (got < sizeof buf) {
      if (ferror(in)) {
        ps_diag_set(&d, PS_E_IO, "trace", 0, "read error: %s", strerror(errno));
        status = 2;
      }
      break;
    }
  }
  if (in != stdin)
    fclose(in);

  engine *eng = NULL;
  if (status == 0) {
    engine_config ec;
    settings_engine_config(&set, &ec);
    ps_diag ed;
    ps_diag_clear(&ed);
    if (engine_open(&ec, &eng, &ed) != PS_E_OK) {
      if (ps.tty)
        fputc('\n', stderr);
      fprintf(stderr, "pdbsym trace: cannot open the cache in %s: %s\n", ec.cache_dir,
              ps_diag_format(&ed, msg, sizeof msg));
      trace_job_close(job);
      return 1;
    }
    if (trace_job_finish(job, eng, local_lookup, &ld, &d) != PS_E_OK)
      status = 2;
  }
  if (ps.tty) {
    ps.last = 0;
    show_progress(&ps, trace_job_stats(job));
    fputc('\n', stderr);
  }
  if (status == 0) {
    FILE *out = outpath && strcmp(outpath, "-") ? fopen(outpath, "wb") : stdout;
    if (!out) {
      fprintf(stderr, "pdbsym trace: cannot write %s: %s\n", outpath, strerror(errno));
      status = 1;
    } else {
      if (trace_job_write(job, fmt, write_file, out, &d) != PS_E_OK)
        status = 1;
      if (out != stdout ? fclose(out) != 0 : fflush(out) != 0) {
        if (!status)
          ps_diag_set(&d, PS_E_IO, "trace output", 0, "%s", strerror(errno));
        status = 1;
      }
    }
  }
  if (status)
    fprintf(stderr, "pdbsym trace: %s: %s\n", file, ps_diag_format(&d, msg, sizeof msg));
  if (status == 0) {
    /* written: what the trace lacks, and whether the profile is any use */
    const trace_stats *s = trace_job_stats(job);
    const char *w;
    size_t nw = 0;
    for (; (w = trace_job_warning(job, nw)) != NULL; nw++)
      if (!quiet)
        fprintf(stderr, "pdbsym trace: warning: %s\n", w);
    if (!quiet && s->modules_needed > s->modules_found)
      fprintf(stderr, "pdbsym trace: %llu of %llu modules with frames in the samples have no "
                      "symbols here (no file:line for their frames)\n",
              (unsigned long long)(s->modules_needed - s->modules_found),
              (unsigned long long)s->modules_needed);
    if (trace_job_useless(job) || (strict && nw))
      status = 3;
  }
  if (stats_path && write_stats(stats_path, trace_job_stats(job), &opt) != 0 && !status)
    status = 1;
  trace_job_close(job);
  if (eng)
    engine_close(eng);
  return status;
}
