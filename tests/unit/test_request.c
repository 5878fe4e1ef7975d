/*
 * test_request.c - request bodies into arrays (server/request.h): what a body
 * fills in, and which 400 a bad body gets, with the expectations written out
 * from api.md and CONTRACT.md (field names, the order of the checks): the
 * answer must not depend on the order of the keys in the body, a syntax error
 * anywhere wins over a shape error, limits over single bad entries.  Also:
 * the arrays are charged to the memory budget and a budget too small gives
 * RQ_BUDGET, not a crash or a partial request.
 */
#include "request.h"
#include "test.h"

static const rq_limits LIM = {3, 5};

typedef struct {
  int v5;
  const char *body;
  rq_result want;
  const char *field; /* NULL: not checked */
  const char *msg;   /* a part of the message; NULL: not checked */
} case_t;

static void run_case(const case_t *c) {
  rq_request r;
  memset(&r, 0, sizeof r);
  rq_error e;
  memset(&e, 0, sizeof e);
  size_t n = strlen(c->body);
  rq_result got = c->v5 ? rq_parse_v5(c->body, n, &LIM, NULL, &r, &e) : rq_parse_symbolicate(c->body, n, &LIM, NULL, &r, &e);
  bool ok = got == c->want && (!c->field || !strcmp(e.field, c->field)) && (!c->msg || strstr(e.msg, c->msg));
  if (!ok) {
    t_failed_checks++;
    fprintf(stderr, "  body %s\n    got %d [%s] %s\n    want %d [%s] %s\n", c->body, got, e.field, e.msg,
            c->want, c->field ? c->field : "*", c->msg ? c->msg : "*");
  }
  rq_free(&r);
}

#define M "{\"debug_file\":\"a.pdb\",\"debug_id\":\"3773E3530B2E493882ECA7324B16C2D91\"}"

TEST(symbolicate_errors) {
  static const case_t cases[] = {
      {0, "", RQ_BAD, "", "invalid JSON: '[' or '{' expected near end of file"},
      {0, "7", RQ_BAD, "", "invalid JSON: '[' or '{' expected"},
      {0, "[1,2]", RQ_BAD, "", "the body must be a JSON object"},
      {0, "[1,2", RQ_BAD, "", "invalid JSON"},
      {0, "{\"modules\": [", RQ_BAD, "", "invalid JSON"},
      {0, "{\"frames\":[],\"modules\":[]} x", RQ_BAD, "", "invalid JSON: end of file expected"},
      {0, "{\"modules\":[],\"modules\":[],\"frames\":[]}", RQ_BAD, "", "duplicate object key"},
      {0, "{\"frames\":[]}", RQ_BAD, "modules", "modules must be an array"},
      {0, "{\"modules\":{},\"frames\":[]}", RQ_BAD, "modules", "modules must be an array"},
      {0, "{\"modules\":[]}", RQ_BAD, "frames", "frames must be an array"},
      {0, "{\"frames\":null,\"modules\":[]}", RQ_BAD, "frames", "frames must be an array"},
      /* a syntax error after a bad frame: the syntax error */
      {0, "{\"modules\":[" M "],\"frames\":[{\"module\":9,\"rva\":1}],\"x\":[1,}", RQ_BAD, "", "invalid JSON"},
      /* limits before single entries, whatever the key order */
      {0, "{\"frames\":[{\"rva\":1}],\"modules\":[" M "," M "," M "," M "]}", RQ_BAD, "modules",
       "too many modules: 4, the limit is max_modules = 3"},
      {0, "{\"modules\":[5],\"frames\":[1,2,3,4,5,6]}", RQ_BAD, "frames",
       "too many frames: 6, the limit is max_frames = 5"},
      {0, "{\"modules\":[5],\"frames\":[],\"timeout\":-1}", RQ_BAD, "timeout", "non-negative"},
      {0, "{\"timeout\":\"5\",\"modules\":[],\"frames\":[]}", RQ_BAD, "timeout", NULL},
      {0, "{\"timeout\":[1],\"modules\":[],\"frames\":[]}", RQ_BAD, "timeout", NULL},
      /* modules before frames, whatever the key order */
      {0, "{\"frames\":[{\"module\":0,\"rva\":true}],\"modules\":[{\"debug_file\":\"a.pdb\",\"debug_id\":\"xyz\"}]}",
       RQ_BAD, "modules[0].debug_id", "invalid debug_id: "},
      {0, "{\"modules\":[" M ",7],\"frames\":[]}", RQ_BAD, "modules[1]", "a module must be an object"},
      /* frames before modules in the body: the range check still sees 2 modules */
      {0, "{\"frames\":[{\"module\":1,\"rva\":1},{\"module\":2,\"rva\":1}],\"modules\":[" M "," M "]}", RQ_BAD,
       "frames[1].module", "module index out of range"},
      {0, "{\"modules\":[" M "," M "],\"frames\":[{\"module\":1,\"rva\":1},{\"module\":2,\"rva\":1}]}", RQ_BAD,
       "frames[1].module", "module index out of range"},
      {0, "{\"frames\":[{\"module\":0,\"rva\":1},{\"module\":0}],\"modules\":[" M "]}", RQ_BAD, "frames[1]",
       "needs rva"},
      {0, "{\"modules\":[" M "],\"frames\":[{\"module\":0,\"rva\":\"123\"}]}", RQ_BAD, "frames[0].rva", NULL},
      {0, "{\"modules\":[" M "],\"frames\":[{\"module\":0,\"token\":\"0x06000001\"}]}", RQ_BAD,
       "frames[0].il_offset", NULL},
      {0, "{\"modules\":[" M "],\"frames\":[{\"module\":0,\"rva\":1,\"rva\":2}]}", RQ_BAD, "",
       "duplicate object key"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(&cases[i]);
}

TEST(symbolicate_fills_arrays) {
  const char *body = "{\"timeout\": 2.5, \"frames\": [{\"module\": 1, \"rva\": \"0x1a2b\"},"
                     " {\"module\": 0, \"token\": \"0x06000004\", \"il_offset\": 6},"
                     " {\"module\": 0, \"rva\": \"0x100000000\"}, {\"module\": 0, \"token\": 5, \"il_offset\": 0}],"
                     " \"other\": {\"ignored\": [1, 2]},"
                     " \"modules\": [{\"debug_file\": \"C:\\\\src\\\\a.pdb\", \"debug_id\": \"3773e353-0b2e-4938-82ec-a7324b16c2d9-1\"},"
                     " {\"debug_file\": \"b.pdb\", \"debug_id\": \"3773E3530B2E493882ECA7324B16C2D9A\", \"format\": \"portable\","
                     "  \"code_file\": \"b.dll\", \"code_id\": \"5F1A2B3C1e000\"}]}";
  rq_request r;
  memset(&r, 0, sizeof r);
  rq_error e;
  uint64_t before = rm_used();
  CHECK_EQ_U(rq_parse_symbolicate(body, strlen(body), &LIM, NULL, &r, &e), RQ_OK);
  CHECK(rm_used() > before);
  CHECK_EQ_U(r.nmods, 2);
  CHECK_EQ_S(r.mods[0].id.debug_file, "a.pdb");
  CHECK_EQ_U(r.mods[0].id.age, 1);
  CHECK_EQ_U(r.mods[1].id.age, 10);
  CHECK_EQ_U(r.mods[1].id.format, ST_FORMAT_PORTABLE);
  CHECK(r.mods[1].id.has_code_id);
  CHECK_EQ_U(r.mods[1].id.code_size, 0x1e000);
  CHECK_EQ_U(r.nframes, 4);
  CHECK_EQ_U(r.frames[0].module, 1);
  CHECK_EQ_U(r.frames[0].kind, RQ_NATIVE);
  CHECK_EQ_U(r.frames[0].rva, 0x1a2b);
  CHECK_EQ_U(r.frames[1].kind, RQ_MANAGED);
  CHECK_EQ_U(r.frames[1].rva, 0x06000004);
  CHECK_EQ_U(r.frames[1].il, 6);
  CHECK(!r.frames[1].invalid);
  CHECK(r.frames[2].invalid);
  CHECK_EQ_S(rq_why_text(r.frames[2].why), "rva does not fit in 32 bits");
  CHECK(r.frames[3].invalid);
  CHECK_EQ_S(rq_why_text(r.frames[3].why), "token is not a MethodDef token (0x06xxxxxx)");
  CHECK(r.has_timeout);
  CHECK(r.timeout == 2.5);
  rq_free(&r);
  CHECK_EQ_U(rm_used(), before);
}

TEST(v5_errors) {
  static const case_t cases[] = {
      {1, "[]", RQ_BAD, "", "the body must be a JSON object"},
      {1, "{\"jobs\":{}}", RQ_BAD, "jobs", "jobs must be an array"},
      {1, "{\"jobs\":null}", RQ_BAD, "jobs", "jobs must be an array"},
      {1, "{\"jobs\":[1,1,1,1,1,1,1,1,1,1,1]}", RQ_BAD, "jobs", "too many jobs: 11, the limit is 10"},
      {1, "{\"jobs\":[{\"memoryMap\":[[\"a.pdb\"," "\"x\"],[\"a.pdb\",\"x\"]],\"stacks\":[]},"
          "{\"stacks\":[],\"memoryMap\":[[\"a.pdb\",\"x\"],[\"a.pdb\",\"x\"]]}]}",
       RQ_BAD, "memoryMap", "too many modules: 4, the limit is max_modules = 3"},
      {1, "{\"jobs\":[{\"memoryMap\":[],\"stacks\":[]},7]}", RQ_BAD, "jobs[1]", "a job must be an object"},
      {1, "{\"stacks\":[]}", RQ_BAD, "memoryMap", "memoryMap must be an array"},
      {1, "{\"memoryMap\":[]}", RQ_BAD, "stacks", "stacks must be an array"},
      {1, "{\"jobs\":[{\"stacks\":[[[0,1]]],\"memoryMap\":{}}]}", RQ_BAD, "jobs[0].memoryMap", NULL},
      /* memoryMap entries before stacks, whatever the key order */
      {1, "{\"stacks\":[[{}]],\"memoryMap\":[[\"a.pdb\",\"nothex\"]]}", RQ_BAD, "memoryMap[0]",
       "invalid breakpad_id: "},
      {1, "{\"stacks\":[5],\"memoryMap\":[]}", RQ_BAD, "stacks[0]", "a stack must be an array"},
      {1, "{\"memoryMap\":[],\"stacks\":[[[0,1],[0,\"12\"]]]}", RQ_BAD, "stacks[0][1]", "module_offset"},
      {1, "{\"memoryMap\":[],\"stacks\":[[[0,1,2]]]}", RQ_BAD, "stacks[0][0]", "a frame must be"},
      /* a bad frame in the job that passes max_frames is reported first */
      {1, "{\"jobs\":[{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1]]]},"
          "{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1],{}]]}]}",
       RQ_BAD, "jobs[1].stacks[0][3]", "a frame must be"},
      {1, "{\"jobs\":[{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1]]]},"
          "{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1]]]},{\"memoryMap\":[],\"stacks\":[{}]}]}",
       RQ_BAD, "stacks", "too many frames: more than the limit max_frames = 5"},
      /* "jobs" wins over a bare job at the top level */
      {1, "{\"memoryMap\":7,\"jobs\":[{\"memoryMap\":[],\"stacks\":[]}]}", RQ_OK, NULL, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(&cases[i]);
}

TEST(v5_fills_arrays) {
  const char *body = "{\"jobs\": [{\"stacks\": [[[0, 16], [1, \"0x20\"], [5, 1]], []],"
                     "  \"memoryMap\": [[\"C:\\\\long\\\\path\\\\a.pdb\", \"3773E3530B2E493882ECA7324B16C2D91\"],"
                     "                 [\"b.pdb\", \"3773E3530B2E493882ECA7324B16C2D92\"],"
                     "                 [\"unused.pdb\", \"3773E3530B2E493882ECA7324B16C2D93\"]]},"
                     " {\"memoryMap\": [], \"stacks\": [[[0, \"0xffffffffffffffffff\"]]]}]}";
  rq_request r;
  memset(&r, 0, sizeof r);
  rq_error e;
  rq_limits lim = {10, 10};
  CHECK_EQ_U(rq_parse_v5(body, strlen(body), &lim, NULL, &r, &e), RQ_OK);
  CHECK_EQ_U(r.njobs, 2);
  CHECK_EQ_U(r.nmods, 3);
  CHECK_EQ_U(r.jobs[0].nmods, 3);
  CHECK_EQ_U(r.jobs[0].nstacks, 2);
  CHECK_EQ_U(r.jobs[1].nmods, 0);
  CHECK_EQ_U(r.jobs[1].nstacks, 1);
  CHECK_EQ_S(r.mods[0].id.debug_file, "a.pdb");
  CHECK(r.mods[0].given_len == strlen("C:\\long\\path\\a.pdb/3773E3530B2E493882ECA7324B16C2D91") &&
        !memcmp(rq_given(&r, &r.mods[0]), "C:\\long\\path\\a.pdb/3773E3530B2E493882ECA7324B16C2D91",
                r.mods[0].given_len));
  CHECK(!r.mods[0].skip && !r.mods[1].skip);
  CHECK(r.mods[2].skip); /* no frame names it */
  const rq_stack *s0 = &r.stacks[r.jobs[0].stack_first];
  CHECK_EQ_U(s0[0].count, 3);
  CHECK_EQ_U(s0[1].count, 0);
  CHECK_EQ_U(r.v5_frames[s0[0].first + 1].module_index, 1);
  CHECK_EQ_U(r.v5_frames[s0[0].first + 1].offset, 0x20);
  CHECK_EQ_U(r.v5_frames[s0[0].first + 2].module_index, 5);
  const rq_stack *s1 = &r.stacks[r.jobs[1].stack_first];
  CHECK_EQ_U(s1[0].count, 1);
  CHECK(!r.v5_frames[s1[0].first].offset_ok); /* too big: answered without a lookup */
  rq_free(&r);
}

TEST(budget) {
  /* 400 frames are 12.8 KB of arrays: a 8 KiB budget cannot take them */
  char body[16384];
  size_t n = (size_t)snprintf(body, sizeof body, "{\"modules\":[" M "],\"frames\":[");
  for (int i = 0; i < 400; i++)
    n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"module\":0,\"rva\":%d}", i ? "," : "", i);
  n += (size_t)snprintf(body + n, sizeof body - n, "]}");
  rq_limits lim = {10, 1000};
  uint64_t before = rm_used();
  rm_set_max(before + 8192);
  rq_request r;
  memset(&r, 0, sizeof r);
  rq_error e;
  CHECK_EQ_U(rq_parse_symbolicate(body, n, &lim, NULL, &r, &e), RQ_BUDGET);
  rq_free(&r);
  CHECK_EQ_U(rm_used(), before);
  rm_set_max(0);
  memset(&r, 0, sizeof r);
  CHECK_EQ_U(rq_parse_symbolicate(body, n, &lim, NULL, &r, &e), RQ_OK);
  CHECK_EQ_U(r.nframes, 400);
  CHECK_EQ_U(r.frames[399].rva, 399);
  rq_free(&r);
}

int main(void) {
  RUN(symbolicate_errors);
  RUN(symbolicate_fills_arrays);
  RUN(v5_errors);
  RUN(v5_fills_arrays);
  RUN(budget);
  return test_summary();
}
