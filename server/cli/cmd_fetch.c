/*
 * cmd_fetch.c - `pdbsym fetch DEBUG_FILE DEBUG_ID [--out FILE]`: downloads one
 * PDB (or, with --code, one PE image) from the configured sources and writes
 * it out, saying where it came from.
 *
 * Identity check: a served PDB must carry the requested GUID and age (a
 * Portable PDB its id's GUID), a served image the requested TimeDateStamp and
 * SizeOfImage; anything else is refused and the next source is tried.
 * --no-verify accepts whatever a source serves (for raw transfers).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fetch.h"
#include "module.h"
#include "settings.h"

static void fetch_usage(FILE *out) {
  fprintf(out,
          "usage: pdbsym fetch DEBUG_FILE DEBUG_ID [OPTIONS]\n"
          "       pdbsym fetch --code CODE_FILE CODE_ID [OPTIONS]\n"
          "Downloads a PDB (or a PE image) from the symbol path and writes it to --out\n"
          "(default: ./DEBUG_FILE).  Prints where it came from.\n\n"
          "  --out FILE              where to write it\n"
          "  --format windows|portable  which key to try (default both)\n"
          "  --symbol-path PATH      sources (default $PDBSYM_SYMBOL_PATH, else Microsoft's)\n"
          "  --offline               read the symbol path's folders only (env PDBSYM_OFFLINE)\n"
          "  --config FILE           a config file of `key = value` lines (symbol_path, offline)\n"
          "  --header 'Name: value'  extra HTTP header for every HTTP source (repeatable)\n"
          "  --connect-timeout-ms N  --low-speed-time S  --low-speed-limit BYTES_PER_S\n"
          "  --retries N (0: none)   --retry-base-ms N  --max-redirects N\n"
          "  --max-bytes N           download cap   --max-inflated N  CAB member cap\n"
          "  --no-verify             accept whatever a source serves (no GUID/age check)\n"
          "  -v                      list the sources first\n\n"
          "Exit status: 0 written, 1 not found or the download failed, 2 usage error.\n");
}

static bool accept_any(void *ctx, const fetch_file *file, ps_diag *diag) {
  (void)ctx;
  (void)file;
  (void)diag;
  return true;
}

static bool parse_num(const char *s, long long *out) {
  if (!s || !*s)
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

static void fetch_warn(void *ctx, const char *msg) {
  (void)ctx;
  fprintf(stderr, "pdbsym fetch: warning: %s\n", msg);
}

int cmd_fetch(int argc, char **argv) {
  fetch_config cfg;
  memset(&cfg, 0, sizeof cfg);
  const char *pos[2] = {NULL, NULL};
  int npos = 0;
  const char *out = NULL, *format = NULL;
  bool code = false, verbose = false, verify = true;
  const char *headers[33];
  int nh = 0;
  settings set; /* PDBSYM_SYMBOL_PATH and the config file, as every command */
  settings_init(&set, argc, argv);
  cfg_dl_limits(&set.cfg, &cfg.lim); /* the download settings (deadlines, retries...), as serve's */
  cfg.symbol_path = set.symbol_path;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long long n = 0;
    int sf;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fetch_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--code")) {
      code = true;
    } else if (!strcmp(a, "-v")) {
      verbose = true;
    } else if (!strcmp(a, "--no-verify")) {
      verify = false;
    } else if (!strcmp(a, "--out") && v) {
      out = v, i++;
    } else if (!strcmp(a, "--format") && v) {
      format = v, i++;
    } else if ((sf = settings_flag(&set, argc, argv, &i)) != 0) {
      if (sf < 0)
        return 2; /* --symbol-path, --offline, --config...: the shared flags */
    } else if (!strcmp(a, "--header") && v) {
      if (nh == 32) {
        fprintf(stderr, "pdbsym fetch: at most 32 --header\n");
        return 2;
      }
      headers[nh++] = v, i++;
    } else if (a[0] == '-' && a[1] == '-' && v && parse_num(v, &n)) {
      i++;
      if (!strcmp(a, "--connect-timeout-ms"))
        cfg.lim.connect_timeout_ms = (long)n;
      else if (!strcmp(a, "--low-speed-time"))
        cfg.lim.low_speed_time_s = (long)n;
      else if (!strcmp(a, "--low-speed-limit"))
        cfg.lim.low_speed_limit = (long)n;
      else if (!strcmp(a, "--retries"))
        cfg.lim.max_retries = n == 0 ? -1 : (int)n;
      else if (!strcmp(a, "--retry-base-ms"))
        cfg.lim.retry_base_ms = (long)n;
      else if (!strcmp(a, "--max-redirects"))
        cfg.lim.max_redirects = (int)n;
      else if (!strcmp(a, "--max-bytes"))
        cfg.max_download_bytes = (uint64_t)n;
      else if (!strcmp(a, "--max-inflated"))
        cfg.max_inflated_bytes = (uint64_t)n;
      else {
        fprintf(stderr, "pdbsym fetch: unknown option '%s'; run 'pdbsym fetch --help'\n", a);
        return 2;
      }
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "pdbsym fetch: unknown option or missing value '%s'; run 'pdbsym fetch --help'\n", a);
      return 2;
    } else if (npos < 2) {
      pos[npos++] = a;
    } else {
      fprintf(stderr, "pdbsym fetch: unexpected argument '%s'; run 'pdbsym fetch --help'\n", a);
      return 2;
    }
  }
  if (npos != 2) {
    fprintf(stderr, "pdbsym fetch: give DEBUG_FILE and DEBUG_ID (or --code CODE_FILE CODE_ID); "
                    "run 'pdbsym fetch --help'\n");
    return 2;
  }
  headers[nh] = NULL;
  cfg.headers = nh ? headers : NULL;
  cfg.symbol_path = set.symbol_path;
  settings_warn_folders(&set.cfg, fetch_warn, NULL);

  module_id m;
  memset(&m, 0, sizeof m);
  const char *why = NULL;
  char *name = code ? m.code_file : m.debug_file;
  if (!module_parse_file_name(pos[0], name, MODULE_NAME_MAX + 1, &why)) {
    fprintf(stderr, "pdbsym fetch: invalid file name: %s\n", why);
    return 2;
  }
  if (code) {
    if (!module_parse_code_id(pos[1], &m.code_timestamp, &m.code_size, &why)) {
      fprintf(stderr, "pdbsym fetch: %s\n", why);
      return 2;
    }
    m.has_code_id = true;
    snprintf(m.code_id_text, sizeof m.code_id_text, "%s", pos[1]);
  }
  st_format fmt = ST_FORMAT_UNKNOWN;
  if (format && !strcmp(format, "windows"))
    fmt = ST_FORMAT_WINDOWS;
  else if (format && !strcmp(format, "portable"))
    fmt = ST_FORMAT_PORTABLE;
  else if (format) {
    fprintf(stderr, "pdbsym fetch: --format is windows or portable\n");
    return 2;
  }
  if (!code) {
    m.format = fmt; /* a debug id without an age names a Portable PDB (module.h) */
    if (!module_set_debug_id(&m, pos[1], &why)) {
      fprintf(stderr, "pdbsym fetch: %s\n", why);
      return 2;
    }
    fmt = m.format;
    m.format = ST_FORMAT_UNKNOWN;
  }

  /* download next to the output so the final rename stays on one file system */
  char outbuf[1024], dir[1024];
  snprintf(outbuf, sizeof outbuf, "%s", out ? out : name);
  snprintf(dir, sizeof dir, "%s", outbuf);
  char *slash = strrchr(dir, '/');
  if (slash == dir)
    dir[1] = '\0';
  else if (slash)
    *slash = '\0';
  else
    snprintf(dir, sizeof dir, ".");
  cfg.tmp_dir = dir;

  fetcher *f = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  char msg[400];
  if (fetch_open(&cfg, &f, &d) != PS_E_OK) {
    fprintf(stderr, "pdbsym fetch: %s\n", ps_diag_format(&d, msg, sizeof msg));
    return 2;
  }
  if (set.offline) {
    /* offline (--offline, PDBSYM_OFFLINE, offline = true): the symbol path's
     * folders only, in their order; its servers are never asked */
    static char folders[sizeof set.cfg.symbol_path];
    size_t used = 0;
    bool fit = true;
    for (size_t i = 0; i < fetch_source_count(f); i++) {
      fetch_source_info si;
      if (!fetch_source_get(f, i, &si) || si.http)
        continue;
      int w = snprintf(folders + used, sizeof folders - used, "%s%s", used ? ";" : "", si.base);
      if (w < 0 || (size_t)w >= sizeof folders - used) {
        fit = false;
        break;
      }
      used += (size_t)w;
    }
    fetch_close(f);
    f = NULL;
    if (!fit || used == 0) {
      fprintf(stderr, "pdbsym fetch: offline, and the symbol path names no folder to read%s\n",
              fit ? "" : " (too long)");
      return 1;
    }
    cfg.symbol_path = folders;
    if (fetch_open(&cfg, &f, &d) != PS_E_OK) {
      fprintf(stderr, "pdbsym fetch: %s\n", ps_diag_format(&d, msg, sizeof msg));
      return 2;
    }
  }
  if (verbose)
    for (size_t i = 0; i < fetch_source_count(f); i++) {
      fetch_source_info si;
      if (fetch_source_get(f, i, &si))
        fprintf(stderr, "source %zu: %s %s (%zu extra headers)\n", i + 1,
                si.http ? "http  " : "folder", si.base, si.nheaders);
    }
  char path[1100], source[2048];
  /* the file must be the module asked for (fetch_verify_identity) */
  fetch_identity vc = {.m = &m, .fmt = fmt, .image = code};
  fetch_verify_fn check = verify ? fetch_verify_identity : accept_any;
  void *cctx = verify ? (void *)&vc : NULL;
  fetch_status st =
      code ? fetch_image(f, &m, check, cctx, path, sizeof path, source, sizeof source, &d)
           : fetch_pdb(f, &m, fmt, check, cctx, path, sizeof path, source, sizeof source, &d);
  fetch_close(f);
  if (st != FETCH_FOUND) {
    fprintf(stderr, "pdbsym fetch: %s%s\n", st == FETCH_NOT_FOUND ? "" : "failed: ",
            ps_diag_format(&d, msg, sizeof msg));
    return 1;
  }
  if (rename(path, outbuf) != 0) {
    fprintf(stderr, "pdbsym fetch: cannot write %s: %s\n", outbuf, strerror(errno));
    unlink(path);
    return 1;
  }
  mode_t mask = umask(022);
  umask(mask);
  if (chmod(outbuf, 0666 & ~mask) != 0)
    fprintf(stderr, "pdbsym fetch: cannot chmod %s: %s\n", outbuf, strerror(errno));
  struct stat sb;
  long long size = stat(outbuf, &sb) == 0 ? (long long)sb.st_size : -1;
  printf("%s\t%lld\t%s\n", outbuf, size, source);
  return 0;
}
