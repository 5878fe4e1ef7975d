/*
 * bench_render.c - the in-process limit for bench_http.py: the same frames
 * answered without HTTP, with the PDBs parsed once up front, then for each
 * round every frame looked up (st_lookup_rva) and rendered (render_answer_obj)
 * into one JSON answer that is serialised, as the server does per request.
 * It builds the answer from the service's jansson objects as api.c does, so
 * CMakeLists.txt gives it, by name, server/service/internal and jansson.
 *
 *   bench_render ROUNDS PDB:RVA,RVA,... [PDB:RVA,...]...
 * Prints frames per CPU second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "filemap.h"
#include "loader.h"
#include "render_json.h"

#define MAX_MODS 64

typedef struct {
  symtab st;
  ps_budget budget;
  uint32_t *rvas;
  size_t n;
} mod;

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_render ROUNDS PDB:RVA,RVA... ...\n");
    return 2;
  }
  int rounds = atoi(argv[1]);
  static mod mods[MAX_MODS];
  int nm = 0;
  size_t total = 0;
  for (int i = 2; i < argc && nm < MAX_MODS; i++, nm++) {
    char *spec = argv[i], *colon = strrchr(spec, ':');
    if (!colon)
      return 2;
    *colon = '\0';
    filemap fm;
    ps_diag d;
    ps_diag_clear(&d);
    if (filemap_open(&fm, spec, 0, &d) != PS_E_OK)
      return fprintf(stderr, "cannot open %s\n", spec), 1;
    mod *m = &mods[nm];
    ps_budget_init(&m->budget, PS_DEFAULT_BUDGET);
    st_init(&m->st, &m->budget);
    if (loader_read(fm.data, fm.len, NULL, 0, &m->budget, &m->st, &d) != PS_E_OK)
      return fprintf(stderr, "cannot read %s\n", spec), 1;
    m->st.budget = NULL;
    filemap_close(&fm);
    m->rvas = calloc(strlen(colon + 1) / 2 + 2, sizeof *m->rvas);
    for (char *t = strtok(colon + 1, ","); t; t = strtok(NULL, ","))
      m->rvas[m->n++] = (uint32_t)strtoul(t, NULL, 0);
    total += m->n;
  }
  double t0 = cpu_seconds();
  size_t bytes = 0;
  for (int r = 0; r < rounds; r++) {
    json_t *frames = json_array();
    for (int i = 0; i < nm; i++) {
      render_module rm;
      render_module_init(&rm, &mods[i].st);
      for (size_t k = 0; k < mods[i].n; k++) {
        st_answer a;
        st_lookup_rva(&mods[i].st, mods[i].rvas[k], &a);
        json_array_append_new(frames, render_answer_obj(&rm, &a, i, false, mods[i].rvas[k], 0));
      }
      render_module_free(&rm);
    }
    char *s = json_dumps(frames, JSON_COMPACT);
    bytes += strlen(s);
    free(s);
    json_decref(frames);
  }
  double dt = cpu_seconds() - t0;
  printf("in-process: %zu frames x %d rounds in %.3f CPU s: %.0f frames per CPU second (%zu bytes of JSON)\n",
         total, rounds, dt, (double)total * rounds / dt, bytes);
  for (int i = 0; i < nm; i++) {
    st_free(&mods[i].st);
    free(mods[i].rvas);
  }
  return 0;
}
