/*
 * cmd_symbolicate.c - `pdbsym symbolicate`: the body of POST /symbolicate on
 * standard input, the answer on standard output.  The request goes through
 * api_handle, the code `pdbsym serve` runs for the route, with the same
 * settings (settings.h), cache and sources; only the socket is missing.
 *
 * Exit status: 0 with an answer (HTTP 200), 2 when the request is refused
 * (HTTP 400/413: the same JSON error body on stdout, one line on stderr),
 * 1 when the service itself fails (cache cannot be opened, HTTP 5xx).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api.h"
#include "cli.h"
#include "log.h"
#include "settings.h"

static void symbolicate_usage(FILE *out) {
  fprintf(out,
          "usage: pdbsym symbolicate [OPTIONS] [FILE]\n\n"
          "Reads a POST /symbolicate request (JSON, see api.md) from FILE or standard\n"
          "input and prints the answer the service would give, using the same cache\n"
          "and symbol sources as 'pdbsym serve'.\n\n"
          "  --v5                the request is a /symbolicate/v5 (Eliot) body\n"
          "  --pretty            indent the answer\n"
          "%s\n"
          "Exit status: 0 answered, 1 the cache could not be opened or the service\n"
          "failed, 2 bad request (the JSON error goes to stdout, a message to stderr)\n"
          "or usage error.\n",
          settings_help());
}

/* Reads all of f, at most cap bytes.  Returns malloc'd text (caller frees),
 * NULL with *too_big set when longer than cap, or NULL on a read error. */
static char *read_all(FILE *f, size_t cap, size_t *len, bool *too_big) {
  size_t n = 0, sz = 65536;
  char *buf = malloc(sz + 1);
  *too_big = false;
  while (buf) {
    size_t want = sz - n;
    size_t got = fread(buf + n, 1, want, f);
    n += got;
    if (n > cap) {
      *too_big = true;
      free(buf);
      return NULL;
    }
    if (got < want)
      break;
    char *bigger = realloc(buf, sz * 2 + 1);
    if (!bigger) {
      free(buf);
      return NULL;
    }
    buf = bigger;
    sz *= 2;
  }
  if (!buf || ferror(f)) {
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

int cmd_symbolicate(int argc, char **argv) {
  settings set;
  settings_init(&set, argc, argv);
  const char *file = NULL;
  bool v5 = false, pretty = false;
  for (int i = 1; i < argc; i++) {
    int used = settings_flag(&set, argc, argv, &i);
    if (used < 0)
      return 2;
    if (used > 0)
      continue;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      symbolicate_usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--v5")) {
      v5 = true;
    } else if (!strcmp(argv[i], "--pretty")) {
      pretty = true;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "pdbsym symbolicate: unknown option '%s'; run 'pdbsym symbolicate --help'\n",
              argv[i]);
      return 2;
    } else if (!file) {
      file = argv[i];
    } else {
      fprintf(stderr, "pdbsym symbolicate: one request file at most; got '%s' too\n", argv[i]);
      return 2;
    }
  }
  FILE *in = stdin;
  if (file && strcmp(file, "-")) {
    in = fopen(file, "rb");
    if (!in) {
      fprintf(stderr, "pdbsym symbolicate: cannot open %s: %s\n", file, strerror(errno));
      return 2;
    }
  }
  size_t len = 0;
  bool too_big = false;
  char *body = read_all(in, (size_t)set.cfg.max_body_bytes, &len, &too_big);
  if (in != stdin)
    fclose(in);
  api_response r;
  if (!body && too_big) {
    char msg[160];
    snprintf(msg, sizeof msg, "request body larger than max_body_bytes = %llu",
             (unsigned long long)set.cfg.max_body_bytes);
    memset(&r, 0, sizeof r);
    api_error(&r, 413, msg, NULL);
  } else if (!body) {
    fprintf(stderr, "pdbsym symbolicate: cannot read the request: %s\n", strerror(errno));
    return 2;
  }

  /* the engine's own log lines (downloads) only when asked for */
  if (!getenv("PDBSYM_LOG_LEVEL"))
    log_set_level("warn");
  else if (!log_set_level(set.cfg.log_level)) {
    fprintf(stderr, "pdbsym symbolicate: log_level: '%s' is not debug, info, warn or error\n",
            set.cfg.log_level);
    free(body);
    return 2;
  }

  engine *eng = NULL;
  if (body) {
    engine_config ec;
    settings_engine_config(&set, &ec);
    ps_diag d;
    ps_diag_clear(&d);
    if (engine_open(&ec, &eng, &d) != PS_E_OK) {
      char msg[512];
      fprintf(stderr, "pdbsym symbolicate: cannot open the cache in %s: %s\n", ec.cache_dir,
              ps_diag_format(&d, msg, sizeof msg));
      free(body);
      return 1;
    }
    api a;
    memset(&a, 0, sizeof a);
    a.eng = eng;
    a.cfg = &set.cfg;
    const char *path = v5 ? "/symbolicate/v5" : "/symbolicate";
    api_route_id route;
    const char *allow;
    api_route("POST", path, &route, &allow);
    api_handle(&a, route, path, NULL, body, len, &r);
    free(body);
  }

  int status = r.status == 200 ? 0 : r.status >= 400 && r.status < 500 ? 2 : 1;
  if (r.body) {
    json_error_t je;
    json_t *o = pretty ? json_loadb(r.body, r.len, 0, &je) : NULL;
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_t *err = status ? json_loadb(r.body, r.len, 0, &je) : NULL;
    const char *shown = text ? text : r.body;
    size_t n = strlen(shown);
    fputs(shown, stdout);
    if (!n || shown[n - 1] != '\n')
      fputc('\n', stdout);
    if (status) {
      const char *msg = json_string_value(json_object_get(err, "error"));
      const char *field = json_string_value(json_object_get(err, "field"));
      fprintf(stderr, "pdbsym symbolicate: %s%s%s%s (HTTP %u)\n",
              status == 2 ? "bad request: " : "", msg ? msg : "failed", field ? " in " : "",
              field ? field : "", r.status);
    }
    json_decref(err);
    json_decref(o);
    free(text);
  }
  free(r.body);
  fflush(stdout); /* the answer first: closing waits for pending downloads */
  if (eng)
    engine_close(eng);
  return status;
}
