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

#define REPS 7

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *t) {
  double c[REPS];
  memcpy(c, t, sizeof c);
  qsort(c, REPS, sizeof *c, cmp_double);
  return c[REPS / 2];
}

static double fastest(const double *t) {
  double m = t[0];
  for (int i = 1; i < REPS; i++)
    m = t[i] < m ? t[i] : m;
  return m;
}

/* 1. the lookups alone; returns the symbols found in one round */
__attribute__((noinline)) static size_t pass_bare(mod *mods, int nm, int rounds) {
  size_t syms = 0;
  for (int r = 0; r < rounds; r++) {
    syms = 0;
    for (int i = 0; i < nm; i++) {
      for (size_t k = 0; k < mods[i].n; k++) {
        st_answer a;
        st_lookup_rva(&mods[i].st, mods[i].rvas[k], &a);
        syms += (size_t)a.nsyms;
      }
    }
  }
  return syms;
}

static void ask_strings(const st_answer *a) {
  for (int j = 0; j < a->nsyms; j++) {
    __builtin_prefetch(a->syms[j].function);
    if (a->syms[j].file)
      __builtin_prefetch(a->syms[j].file);
  }
}

/* 2. lookups and the answer's JSON in one jsonw buffer, as api.c does per
 * request; ahead: frame k+1 looked up (its strings asked for) before frame k
 * is written.  Returns the bytes of one round's answer. */
__attribute__((noinline)) static size_t pass_json(mod *mods, int nm, int rounds, size_t total, bool ahead) {
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
      static st_answer ab[2];
      if (ahead && mods[i].n)
        st_lookup_rva(&mods[i].st, mods[i].rvas[0], &ab[0]);
      for (size_t k = 0; k < mods[i].n; k++) {
        st_answer *cur = &ab[k & 1];
        if (!ahead) {
          st_lookup_rva(&mods[i].st, mods[i].rvas[k], cur);
        } else if (k + 1 < mods[i].n) {
          st_answer *nx = &ab[(k + 1) & 1];
          st_lookup_rva(&mods[i].st, mods[i].rvas[k + 1], nx);
          ask_strings(nx);
        }
        render_answer_w(&w, &rm, cur, i, false, mods[i].rvas[k], 0);
      }
      render_module_free(&rm);
    }
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    size_t n = 0;
    char *s = jsonw_take(&w, &n);
    bytes = n;
    free(s);
  }
  return bytes;
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
  /* The passes alternate, REPS times each, so that a slower spell of the
   * machine falls on all of them; each reports its fastest and its median
   * repetition. */
  double t_bare[REPS], t_json[REPS], t_pipe[REPS];
  size_t syms = 0, bytes = 0;
  for (int rep = 0; rep < REPS; rep++) {
    double t0 = cpu_seconds();
    syms = pass_bare(mods, nm, rounds);
    t_bare[rep] = cpu_seconds() - t0;
    t0 = cpu_seconds();
    bytes = pass_json(mods, nm, rounds, total, false);
    t_json[rep] = cpu_seconds() - t0;
    t0 = cpu_seconds();
    pass_json(mods, nm, rounds, total, true);
    t_pipe[rep] = cpu_seconds() - t0;
  }
  double frames = (double)total * rounds;
  double bare = median(t_bare), dt = median(t_json), dp = median(t_pipe);
  printf("in-process: %zu frames x %d rounds x %d repetitions: lookup alone: %.3f us/frame "
         "(fastest %.3f; %.2f symbols each); lookup + JSON: %.3f us/frame (fastest %.3f), "
         "%.0f frames per CPU second (%zu bytes of JSON); lookup + JSON, next frame's strings "
         "asked for first: %.3f us/frame (fastest %.3f)\n",
         total, rounds, REPS, bare / frames * 1e6, fastest(t_bare) / frames * 1e6,
         (double)syms / (double)(total ? total : 1), dt / frames * 1e6, fastest(t_json) / frames * 1e6,
         frames / dt, bytes, dp / frames * 1e6, fastest(t_pipe) / frames * 1e6);
  for (int i = 0; i < nm; i++) {
    st_free(&mods[i].st);
    free(mods[i].rvas);
  }
  return 0;
}
