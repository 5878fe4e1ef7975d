/*
 * fuzz_api.c - request bodies for POST /symbolicate and /symbolicate/v5,
 * straight into api_handle (no sockets): whatever the bytes, the answer is a
 * status and a JSON body, never a crash.  The engine is opened offline on a
 * temporary cache folder (removed at exit) and requests wait for nothing
 * (default_timeout 0), so unknown modules come back pending or missing.
 * Every answer is also compared, byte for byte, with the one the renderer
 * before issue 15 gives (tests/unit/api_ref.h): the fuzzer looks for bodies
 * where the streaming writer and the jansson trees part.  When the event
 * loop's way (api_handle_hot) answers a body too, its answer must be the
 * same bytes.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "api.h"
#include "api_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static api the_api;
static srv_config cfg;
static engine *eng;
static char dir[1100];

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void cleanup(void) {
  engine_close(eng);
  if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
    fprintf(stderr, "fuzz_api: could not remove %s\n", dir);
}

static void setup(void) {
  char err[256];
  char *argv[] = {(char *)"fuzz", NULL};
  if (cfg_load(&cfg, 1, argv, err, sizeof err) != 0)
    abort();
  cfg.default_timeout = 0;
  cfg.v5_timeout = 0;
  cfg.max_frames = 2000;
  cfg.v5_max_frames = 2000;
  cfg.max_modules = 64;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/pdbsym-fuzz-api-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir))
    abort();
  engine_config ec;
  memset(&ec, 0, sizeof ec);
  ec.cache_dir = dir;
  ec.offline = true;
  ps_diag d;
  ps_diag_clear(&d);
  if (engine_open(&ec, &eng, &d) != PS_E_OK)
    abort();
  the_api.eng = eng;
  the_api.cfg = &cfg;
  atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!eng)
    setup();
  static const api_route_id routes[] = {RT_SYMBOLICATE, RT_SYMBOLICATE_V5};
  for (size_t i = 0; i < 2; i++) {
    api_response r, ref;
    api_handle(&the_api, routes[i], "/symbolicate", NULL, (const char *)data, size, &r);
    if (!r.body || (r.status != 200 && r.status != 400 && r.status != 413 && r.status != 500))
      abort();
    json_error_t e;
    json_t *j = json_loads(r.body, 0, &e); /* the answer is always JSON */
    if (!j)
      abort();
    json_decref(j);
    ref_api_handle(&the_api, routes[i], "/symbolicate", NULL, (const char *)data, size, &ref);
    if (r.status != 413 && ref_same_answer(&ref, &r) < 0) {
      fprintf(stderr, "fuzz_api: the answers part:\n  old %u %.300s\n  new %u %.300s\n", ref.status,
              ref.body, r.status, r.body);
      abort();
    }
    /* the event loop's way (api_handle_hot): when it answers (a body that
     * does not parse, modules all invalid or none: no module of this empty
     * cache is in memory), the same bytes as a worker's */
    rm_buf b;
    memset(&b, 0, sizeof b);
    b.p = (char *)(uintptr_t)data;
    b.len = size;
    api_response hot;
    if (api_handle_hot(&the_api, routes[i], &b, NULL, engine_now_ms(), &hot)) {
      if (hot.status != r.status || hot.len != r.len || memcmp(hot.body, r.body, r.len) != 0) {
        fprintf(stderr, "fuzz_api: the event loop's answer parts:\n  worker %u %.300s\n  loop %u %.300s\n",
                r.status, r.body, hot.status, hot.body ? hot.body : "");
        abort();
      }
      free(hot.body);
      rm_release(hot.charged);
    }
    free(ref.body);
    free(r.body);
    rm_release(r.charged);
  }
  return 0;
}
