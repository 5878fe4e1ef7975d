/*
 * test_fetch_server.c - the fetch_pdb API against tests/symserver.py: the
 * verify callback (a mismatch moves on to the next source), remembered
 * variants and tiers (fewer requests on the next module), the per-source
 * parallel limit, and temporary files (a file handed over counts against the
 * disk budget until fetch_result_done).  Skipped (77) without python3.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "deadline.h"
#include "fetch.h"
#include "test.h"

static char root[256], tmpd[300], base_url[64];
static pid_t server_pid;

static void write_file(const char *rel, const void *data, size_t len) {
  char p[1024], cmd[1100];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  char *slash = strrchr(p, '/');
  *slash = '\0';
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
  if (system(cmd) != 0)
    return;
  *slash = '/';
  FILE *f = fopen(p, "wb");
  if (!f)
    return;
  fwrite(data, 1, len, f);
  fclose(f);
}

static bool start_server(void) {
  int fds[2];
  if (pipe(fds) != 0)
    return false;
  char script[512];
  snprintf(script, sizeof script, "%s/tests/symserver.py",
           getenv("PDBSYM_SOURCE_DIR") ? getenv("PDBSYM_SOURCE_DIR") : ".");
  server_pid = fork();
  if (server_pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execlp("python3", "python3", script, root, "--exit-with-parent", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  FILE *in = fdopen(fds[0], "r");
  char line[64] = "";
  int port = 0;
  if (!in || !fgets(line, sizeof line, in) || sscanf(line, "PORT %d", &port) != 1) {
    if (in)
      fclose(in);
    return false;
  }
  fclose(in);
  snprintf(base_url, sizeof base_url, "http://127.0.0.1:%d", port);
  return true;
}

static void stop_server(void) {
  if (server_pid > 0) {
    kill(server_pid, SIGTERM);
    waitpid(server_pid, NULL, 0);
  }
}

typedef struct {
  char *p;
  size_t n;
} rbuf;

static size_t rbuf_cb(char *d, size_t s, size_t n, void *u) {
  rbuf *b = u;
  char *np = realloc(b->p, b->n + s * n + 1);
  if (!np)
    return 0;
  memcpy(np + b->n, d, s * n);
  b->n += s * n;
  np[b->n] = '\0';
  b->p = np;
  return s * n;
}

static char *http(const char *path, const char *post) {
  CURL *c = curl_easy_init();
  char url[512];
  snprintf(url, sizeof url, "%s%s", base_url, path);
  rbuf b = {NULL, 0};
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, rbuf_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  if (post)
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  /* a control call that fails would change the test silently (a delay rule
   * not set makes a download quick): it fails the test, named */
  CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK || status != 200) {
    t_failed_checks++;
    fprintf(stderr, "symserver %s: %s, HTTP %ld\n", path, curl_easy_strerror(rc), status);
  }
  curl_easy_cleanup(c);
  return b.p;
}

static void control(const char *json) { free(http("/_control", json)); }
static void reset(void) { free(http("/_reset", "{}")); }

/* hits on path (NULL: total over all paths) */
static long hits(const char *path) {
  char *s = http("/_stats", NULL);
  json_t *j = s ? json_loads(s, 0, NULL) : NULL;
  free(s);
  long n = -1;
  if (j) {
    if (path) {
      json_t *v = json_object_get(json_object_get(j, "hits"), path);
      n = v ? (long)json_integer_value(v) : 0;
    } else {
      n = (long)json_integer_value(json_object_get(j, "total"));
    }
    json_decref(j);
  }
  return n;
}

/* the most requests inside a delay rule at once since the last reset */
static long max_delayed(void) {
  char *s = http("/_stats", NULL);
  json_t *j = s ? json_loads(s, 0, NULL) : NULL;
  free(s);
  long n = j ? (long)json_integer_value(json_object_get(j, "max_delayed")) : -1;
  json_decref(j);
  return n;
}

static size_t files_in(const char *dir) {
  DIR *d = opendir(dir);
  size_t n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)))
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
      n++;
  if (d)
    closedir(d);
  return n;
}

static void module(module_id *m, const char *name, uint32_t age) {
  memset(m, 0, sizeof *m);
  const char *why;
  module_parse_file_name(name, m->debug_file, sizeof m->debug_file, &why);
  module_parse_debug_id("3773e353-0b2e-4938-82ec-a7324b16c2d9-1", m->guid, &m->age, &why);
  m->age = age;
}

/* verify: the file's bytes must equal ctx (a NUL-terminated string) */
static bool verify_content(void *ctx, const fetch_file *file, ps_diag *diag) {
  const char *want = ctx;
  char got[256] = "";
  FILE *f = fopen(file->path, "rb");
  size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
  if (f)
    fclose(f);
  got[n] = '\0';
  if (strcmp(got, want) != 0) {
    ps_diag_set(diag, PS_E_MISMATCH, "test", (size_t)-1, "content '%.20s'", got);
    return false;
  }
  return true;
}

static fetcher *open_fetcher(const char *sp, int parallel) {
  fetch_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.symbol_path = sp;
  cfg.tmp_dir = tmpd;
  cfg.lim.retry_base_ms = 50;
  cfg.max_parallel_per_source = parallel;
  fetcher *f = NULL;
  ps_diag d;
  ps_diag_clear(&d);
  CHECK_EQ_U(fetch_open(&cfg, &f, &d), PS_E_OK);
  return f;
}

TEST(verify_mismatch_next_source) {
  reset();
  /* the first source serves another PDB at the right path; a second one (a
   * little slower, so the first answer is checked first) has the right one */
  write_file("a/wrong.pdb/3773E3530B2E493882ECA7324B16C2D91/wrong.pdb", "other pdb", 9);
  write_file("b/wrong.pdb/3773E3530B2E493882ECA7324B16C2D91/wrong.pdb", "right pdb", 9);
  control("{\"/b/wrong.pdb/3773E3530B2E493882ECA7324B16C2D91/wrong.pdb\": {\"delay\": 0.3}}");
  char sp[600];
  snprintf(sp, sizeof sp, "srv*%s/a;srv*%s/b", base_url, base_url);
  fetcher *f = open_fetcher(sp, 0);
  if (!f)
    return;
  module_id m;
  module(&m, "wrong.pdb", 1);
  char path[1024], src[1024];
  ps_diag d;
  ps_diag_clear(&d);
  fetch_status st = fetch_pdb(f, &m, ST_FORMAT_WINDOWS, verify_content, "right pdb", path,
                              sizeof path, src, sizeof src, &d);
  CHECK_EQ_U(st, FETCH_FOUND);
  CHECK(strstr(src, "/b/wrong.pdb") != NULL);
  CHECK_EQ_U(hits("/a/wrong.pdb/3773E3530B2E493882ECA7324B16C2D91/wrong.pdb"), 1);
  CHECK_EQ_U(hits(NULL), 2); /* no other variant asked of the mismatching source */
  unlink(path);
  /* a folder source is read before the HTTP ones: the right file there means
   * no request at all */
  char local[400], sp2[900];
  snprintf(local, sizeof local, "%s/c", root);
  write_file("c/wrong.pdb/3773E3530B2E493882ECA7324B16C2D91/wrong.pdb", "right pdb", 9);
  snprintf(sp2, sizeof sp2, "srv*%s/a;%s", base_url, local);
  fetcher *f2 = open_fetcher(sp2, 0);
  if (f2) {
    ps_diag_clear(&d);
    st = fetch_pdb(f2, &m, ST_FORMAT_WINDOWS, verify_content, "right pdb", path, sizeof path,
                   src, sizeof src, &d);
    CHECK_EQ_U(st, FETCH_FOUND);
    CHECK(strstr(src, local) == src);
    CHECK_EQ_U(hits(NULL), 2);
    unlink(path);
    fetch_close(f2);
  }
  /* the mismatch alone: an error naming the mismatch, nothing left behind */
  ps_diag_clear(&d);
  st = fetch_pdb(f, &m, ST_FORMAT_WINDOWS, verify_content, "third pdb", path, sizeof path, src,
                 sizeof src, &d);
  CHECK_EQ_U(st, FETCH_ERROR);
  CHECK_EQ_U(d.code, PS_E_MISMATCH);
  CHECK_EQ_U(files_in(tmpd), 0);
  fetch_close(f);
}

TEST(remembered_variant) {
  reset();
  write_file("c/one.pdb/3773E3530B2E493882ECA7324B16C2D91/one.pd_", "", 0);
  /* a real cabinet for each: made by cabmake */
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && printf one > one.pdb && printf two > two.pdb && "
           "python3 '%s/tests/cabmake.py' c/one.pdb/3773E3530B2E493882ECA7324B16C2D91/one.pd_ one.pdb && "
           "mkdir -p c/two.pdb/3773E3530B2E493882ECA7324B16C2D91 && "
           "python3 '%s/tests/cabmake.py' c/two.pdb/3773E3530B2E493882ECA7324B16C2D91/two.pd_ two.pdb",
           root, getenv("PDBSYM_SOURCE_DIR"), getenv("PDBSYM_SOURCE_DIR"));
  CHECK(system(cmd) == 0);
  char sp[300];
  snprintf(sp, sizeof sp, "%s/c", base_url);
  fetcher *f = open_fetcher(sp, 0);
  if (!f)
    return;
  module_id m;
  char path[1024], src[1024];
  ps_diag d;
  ps_diag_clear(&d);
  module(&m, "one.pdb", 1);
  CHECK_EQ_U(fetch_pdb(f, &m, ST_FORMAT_WINDOWS, verify_content, "one", path, sizeof path, src,
                       sizeof src, &d),
             FETCH_FOUND);
  unlink(path);
  CHECK_EQ_U(hits(NULL), 3); /* .pdb (404), then .pd_ and file.ptr together */
  module(&m, "two.pdb", 1);
  CHECK_EQ_U(fetch_pdb(f, &m, ST_FORMAT_WINDOWS, verify_content, "two", path, sizeof path, src,
                       sizeof src, &d),
             FETCH_FOUND);
  unlink(path);
  CHECK_EQ_U(hits(NULL), 4); /* the .pd_ variant straight away */
  /* a miss on a flat store: index2 variants are no longer probed */
  module(&m, "none.pdb", 1);
  CHECK_EQ_U(fetch_pdb(f, &m, ST_FORMAT_WINDOWS, NULL, NULL, path, sizeof path, src, sizeof src,
                       &d),
             FETCH_NOT_FOUND);
  CHECK_EQ_U(hits(NULL), 4 + 4); /* .pd_, then .pdb and file.ptr, then lowercase */
  CHECK_EQ_U(files_in(tmpd), 0);
  fetch_close(f);
}

typedef struct {
  fetcher *f;
  int i;
  fetch_status st;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  module_id m;
  char name[32];
  snprintf(name, sizeof name, "par%d.pdb", j->i);
  module(&m, name, 1);
  char path[1024];
  ps_diag d;
  ps_diag_clear(&d);
  j->st = fetch_pdb(j->f, &m, ST_FORMAT_WINDOWS, NULL, NULL, path, sizeof path, NULL, 0, &d);
  if (j->st == FETCH_FOUND)
    unlink(path);
  return NULL;
}

static double parallel_run(int limit) {
  char sp[300];
  snprintf(sp, sizeof sp, "%s/p", base_url);
  fetcher *f = open_fetcher(sp, limit);
  if (!f)
    return -1;
  job jobs[6];
  pthread_t th[6];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 6; i++) {
    jobs[i] = (job){f, i, FETCH_ERROR};
    pthread_create(&th[i], NULL, run_job, &jobs[i]);
  }
  for (int i = 0; i < 6; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ_U(jobs[i].st, FETCH_FOUND);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  fetch_close(f);
  return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

TEST(parallel_limit) {
  reset();
  char rules[2048] = "{";
  for (int i = 0; i < 6; i++) {
    char rel[200];
    snprintf(rel, sizeof rel, "p/par%d.pdb/3773E3530B2E493882ECA7324B16C2D91/par%d.pdb", i, i);
    write_file(rel, "x", 1);
    size_t n = strlen(rules);
    snprintf(rules + n, sizeof rules - n, "%s\"/%s\": {\"delay\": 0.4}", i ? ", " : "", rel);
  }
  strcat(rules, "}");
  control(rules);
  /* the server also counts the requests inside their delay at once */
  double two = parallel_run(2);
  long at_two = max_delayed();
  reset();
  control(rules);
  double six = parallel_run(6);
  long at_six = max_delayed();
  printf("  6 downloads with a 0.4 s server delay: limit 2: %ld at once (%.2fs), limit 6: %ld at "
         "once (%.2fs)\n", at_two, two, at_six, six);
  /* the time is the check: the server's count includes a request whose
   * client has gone (a transfer retried under load), so it is only shown */
  CHECK(two >= 1.15); /* three waves */
  CHECK(six < two);
  CHECK_EQ_U(files_in(tmpd), 0);
}

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool woken;
} waker;

static void wake_cb(void *ctx) {
  waker *w = ctx;
  pthread_mutex_lock(&w->mu);
  w->woken = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* A file handed over (FETCH_FOUND) stays on disk until the caller is done
 * with it, and counts as a download (against the disk budget, and as proved:
 * the cache evicts for it) until fetch_result_done removes it.  Before, it
 * was uncounted at the handover: downloads took its room while the worker
 * still parsed it, and the cache folder passed its cap (test_cache_folder_cap
 * on a loaded machine). */
TEST(handed_over_file_counts) {
  reset();
  static const char body[] = "held pdb";
  const uint64_t len = sizeof body - 1;
  write_file("c/held.pdb/3773E3530B2E493882ECA7324B16C2D91/held.pdb", body, len);
  char sp[600];
  snprintf(sp, sizeof sp, "srv*%s/c", base_url);
  fetcher *f = open_fetcher(sp, 0);
  if (!f)
    return;
  module_id m;
  module(&m, "held.pdb", 1);
  waker w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
  ps_diag d;
  ps_diag_clear(&d);
  fetch_op *op = fetch_op_new(f, &m, false, ST_FORMAT_WINDOWS, wake_cb, &w, &d);
  CHECK(op != NULL);
  if (!op) {
    fetch_close(f);
    return;
  }
  fetch_result res;
  fetch_status st = FETCH_PENDING;
  for (int i = 0; i < 100 && st == FETCH_PENDING; i++) {
    st = fetch_op_step(op, verify_content, (void *)body, &res, &d);
    if (st != FETCH_PENDING)
      break;
    struct timespec ts = deadline_after_ms(1000);
    pthread_mutex_lock(&w.mu);
    while (!w.woken && pthread_cond_timedwait(&w.cv, &w.mu, &ts) == 0)
      ;
    w.woken = false;
    pthread_mutex_unlock(&w.mu);
  }
  CHECK_EQ_U(st, FETCH_FOUND);
  fetch_op_free(op);
  if (st == FETCH_FOUND) {
    struct stat sb;
    CHECK(stat(res.path, &sb) == 0 && (uint64_t)sb.st_size == len);
    CHECK_EQ_U(fetch_tmp_bytes(f), len);
    CHECK_EQ_U(fetch_tmp_proved_bytes(f), len);
    char path[sizeof res.path];
    snprintf(path, sizeof path, "%s", res.path);
    fetch_result_done(f, &res);
    CHECK(stat(path, &sb) != 0);
  }
  CHECK_EQ_U(fetch_tmp_bytes(f), 0);
  CHECK_EQ_U(fetch_tmp_proved_bytes(f), 0);
  fetch_close(f);
  CHECK_EQ_U(files_in(tmpd), 0);
}

int main(void) {
  if (system("python3 -c 'import http.server' >/dev/null 2>&1") != 0) {
    return test_skip_all("python3 not available (it runs tests/symserver.py)");
  }
  const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(root, sizeof root, "%s/pdbsym-test-fetch-XXXXXX", t);
  if (!mkdtemp(root))
    return 1;
  snprintf(tmpd, sizeof tmpd, "%s/tmp", root);
  mkdir(tmpd, 0700);
  if (!start_server()) {
    fprintf(stderr, "cannot start symserver.py\n");
    return 1;
  }
  RUN(verify_mismatch_next_source);
  RUN(remembered_variant);
  RUN(parallel_limit);
  RUN(handed_over_file_counts);
  stop_server();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", root);
  return test_summary();
}
