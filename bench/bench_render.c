/*
 * bench_render.c - the in-process limit for bench_http.py: the same frames
 * answered without HTTP, with the PDBs parsed once up front.  Two passes of
 * ROUNDS rounds each:
 *   1. the lookups alone (st_lookup_rva of every frame), the bare cost;
 *   2. every frame looked up and rendered (render_answer_w) into one JSON
 *      answer in one jsonw buffer, as api.c does per request.
 *
 *   bench_render ROUNDS PDB:RVA,RVA,... [PDB:@FILE]...
 * (@FILE: the RVAs in a file, separated by commas or white space)
 * Prints microseconds per frame for both, and frames per CPU second of the
 * second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "filemap.h"
#include "jsonw.h"
#include "loader.h"
#include "render.h"

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
    char *list = colon + 1, *text = NULL;
    if (list[0] == '@') { /* long lists do not fit in one argument */
      FILE *f = fopen(list + 1, "rb");
      if (!f)
        return fprintf(stderr, "cannot open %s\n", list + 1), 1;
      fseek(f, 0, SEEK_END);
      long len = ftell(f);
      fseek(f, 0, SEEK_SET);
      text = calloc((size_t)len + 1, 1);
      if (!text || fread(text, 1, (size_t)len, f) != (size_t)len)
        return fprintf(stderr, "cannot read %s\n", list + 1), 1;
      fclose(f);
      list = text;
    }
    m->rvas = calloc(strlen(list) / 2 + 2, sizeof *m->rvas);
    for (char *t = strtok(list, ", \t\r\n"); t; t = strtok(NULL, ", \t\r\n"))
      m->rvas[m->n++] = (uint32_t)strtoul(t, NULL, 0);
    free(text);
    total += m->n;
  }
  /* 1. lookups alone */
  double t0 = cpu_seconds();
  size_t syms = 0;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < nm; i++) {
      for (size_t k = 0; k < mods[i].n; k++) {
        st_answer a;
        st_lookup_rva(&mods[i].st, mods[i].rvas[k], &a);
        syms += (size_t)a.nsyms;
      }
    }
  }
  double bare = cpu_seconds() - t0;
  /* 2. lookups and the answer's JSON */
  t0 = cpu_seconds();
  size_t bytes = 0;
  for (int r = 0; r < rounds; r++) {
    jsonw w;
    jsonw_init(&w, 256 + total * 256, 0);
    jsonw_obj(&w);
    jsonw_key(&w, "frames");
    jsonw_arr(&w);
    for (int i = 0; i < nm; i++) {
      render_module rm;
      render_module_init(&rm, &mods[i].st);
      for (size_t k = 0; k < mods[i].n; k++) {
        st_answer a;
        st_lookup_rva(&mods[i].st, mods[i].rvas[k], &a);
        render_answer_w(&w, &rm, &a, i, false, mods[i].rvas[k], 0);
      }
      render_module_free(&rm);
    }
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    size_t n = 0;
    char *s = jsonw_take(&w, &n);
    bytes += n;
    free(s);
  }
  double dt = cpu_seconds() - t0;
  double frames = (double)total * rounds;
  printf("in-process: %zu frames x %d rounds: lookup alone: %.3f us/frame (%.2f symbols each); "
         "lookup + JSON: %.3f us/frame, %.0f frames per CPU second (%zu bytes of JSON)\n",
         total, rounds, bare / frames * 1e6, (double)syms / frames, dt / frames * 1e6, frames / dt,
         bytes);
  for (int i = 0; i < nm; i++) {
    st_free(&mods[i].st);
    free(mods[i].rvas);
  }
  return 0;
}
