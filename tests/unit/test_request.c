/*
 * test_request.c - request bodies into arrays (server/request.h): what a body
 * fills in, and which 400 a bad body gets, with the expectations written out
 * from api.md and docs/contract.md (field names, the order of the checks): the
 * answer must not depend on the order of the keys in the body, a syntax error
 * anywhere wins over a shape error, limits over single bad entries, and a
 * module whose fields are bad fails alone (the request is answered).  The
 * frames' placement: instruction_addr against image_addr and image_size,
 * return addresses by mode, stack and frame.  Also:
 * the arrays are charged to the memory budget and a budget too small gives
 * RQ_BUDGET, not a crash or a partial request.
 */
#include "request.h"
#include "test.h"

static const rq_limits LIM = {3, 5, 5, 10};

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
      {0, "{\"timeout\":-1,\"instruction_addr_adjustment\":\"some\",\"modules\":[],\"frames\":[]}", RQ_BAD,
       "timeout", NULL},
      {0, "{\"instruction_addr_adjustment\":\"some\",\"modules\":[],\"frames\":[{}]}", RQ_BAD,
       "instruction_addr_adjustment", "\"none\", \"all_but_first\" or \"all\""},
      {0, "{\"instruction_addr_adjustment\":[\"all\"],\"modules\":[],\"frames\":[]}", RQ_BAD,
       "instruction_addr_adjustment", NULL},
      {0, "{\"instruction_addr_adjustment\":null,\"modules\":[],\"frames\":[]}", RQ_OK, NULL, NULL},
      /* a bad module fails alone: the bad frame is what fails the request */
      {0, "{\"frames\":[{\"module\":0,\"rva\":true}],\"modules\":[{\"debug_file\":\"a.pdb\",\"debug_id\":\"xyz\"}]}",
       RQ_BAD, "frames[0].rva", "rva must be an integer or a 0x hex string"},
      {0, "{\"modules\":[" M ",7],\"frames\":[]}", RQ_OK, NULL, NULL},
      /* an index that names no module fails its frame alone, wherever "modules" is */
      {0, "{\"frames\":[{\"module\":1,\"rva\":1},{\"module\":2,\"rva\":1}],\"modules\":[" M "," M "]}", RQ_OK,
       NULL, NULL},
      {0, "{\"frames\":[{\"module\":0,\"rva\":1},{\"module\":0}],\"modules\":[" M "]}", RQ_BAD, "frames[1]",
       "a frame needs rva or instruction_addr (native), or token and il_offset (managed)"},
      {0, "{\"frames\":[{\"module\":0,\"rva\":1,\"instruction_addr\":2}],\"modules\":[" M "]}", RQ_BAD,
       "frames[0]", "a frame has one of rva, instruction_addr (native) or token (managed)"},
      {0, "{\"frames\":[{\"rva\":1}],\"modules\":[" M "]}", RQ_BAD, "frames[0].module", "module is required"},
      {0, "{\"frames\":[{\"module\":\"one\",\"rva\":1}],\"modules\":[" M "]}", RQ_BAD, "frames[0].module",
       "module must be an integer or a 0x hex string"},
      {0, "{\"frames\":[{\"module\":0,\"rva\":1,\"adjust_instruction_addr\":1}],\"modules\":[" M "]}", RQ_BAD,
       "frames[0].adjust_instruction_addr", "must be true or false"},
      {0, "{\"frames\":[{\"module\":0,\"rva\":1,\"stack\":-1}],\"modules\":[" M "]}", RQ_BAD, "frames[0].stack",
       "stack must be a non-negative integer"},
      {0, "{\"frames\":[{\"module\":0,\"instruction_addr\":\"0xg\"}],\"modules\":[" M "]}", RQ_BAD,
       "frames[0].instruction_addr", "instruction_addr must be an integer or a 0x hex string"},
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
  CHECK_EQ_U(r.frames[1].aux, 6);
  CHECK(!(r.frames[1].flags & RQ_F_INVALID));
  CHECK(r.frames[2].flags & RQ_F_INVALID);
  CHECK(r.frames[2].flags & RQ_F_HAS_RVA); /* a number, answered as given */
  CHECK_EQ_S(rq_why_text(r.frames[2].why), "rva does not fit in 32 bits");
  CHECK(r.frames[3].flags & RQ_F_INVALID);
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
      {1, "{\"jobs\":[1,1,1,1,1,1,1,1,1,1,1]}", RQ_BAD, "jobs", "too many jobs: 11, the limit is v5_max_jobs = 10"},
      {1, "{\"jobs\":[{\"memoryMap\":[[\"a.pdb\"," "\"x\"],[\"a.pdb\",\"x\"]],\"stacks\":[]},"
          "{\"stacks\":[],\"memoryMap\":[[\"a.pdb\",\"x\"],[\"a.pdb\",\"x\"]]}]}",
       RQ_BAD, "memoryMap", "too many modules: 4, the limit is max_modules = 3"},
      {1, "{\"jobs\":[{\"memoryMap\":[],\"stacks\":[]},7]}", RQ_BAD, "jobs[1]", "a job must be an object"},
      {1, "{\"stacks\":[]}", RQ_BAD, "memoryMap", "memoryMap must be an array"},
      {1, "{\"memoryMap\":[]}", RQ_BAD, "stacks", "stacks must be an array"},
      {1, "{\"jobs\":[{\"stacks\":[[[0,1]]],\"memoryMap\":{}}]}", RQ_BAD, "jobs[0].memoryMap", NULL},
      /* memoryMap entries before stacks, whatever the key order */
      {1, "{\"stacks\":[[{}]],\"memoryMap\":[[\"a.pdb\"]]}", RQ_BAD, "memoryMap[0]",
       "a memoryMap entry must be [debug_file, breakpad_id]"},
      /* a bad name or id fails the module alone */
      {1, "{\"stacks\":[[[0,1]]],\"memoryMap\":[[\"a.pdb\",\"nothex\"]]}", RQ_OK, NULL, NULL},
      {1, "{\"stacks\":[5],\"memoryMap\":[]}", RQ_BAD, "stacks[0]", "a stack must be an array"},
      {1, "{\"memoryMap\":[],\"stacks\":[[[0,1],[0,\"12\"]]]}", RQ_BAD, "stacks[0][1]", "module_offset"},
      {1, "{\"memoryMap\":[],\"stacks\":[[[0,1,2]]]}", RQ_BAD, "stacks[0][0]", "a frame must be"},
      /* a bad frame in the job that passes max_frames is reported first */
      {1, "{\"jobs\":[{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1]]]},"
          "{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1],{}]]}]}",
       RQ_BAD, "jobs[1].stacks[0][3]", "a frame must be"},
      {1, "{\"jobs\":[{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1]]]},"
          "{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1]]]},{\"memoryMap\":[],\"stacks\":[{}]}]}",
       RQ_BAD, "jobs[1].stacks", "too many addresses: more than the limit v5_max_frames = 5 (all jobs together)"},
      /* the bare form: the field names no job */
      {1, "{\"memoryMap\":[],\"stacks\":[[[0,1],[0,1],[0,1]],[[0,1],[0,1],[0,1]]]}", RQ_BAD, "stacks",
       "too many addresses"},
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
  rq_limits lim = {10, 10, 10, 10};
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
  /* too big: echoed as given, answered without a lookup */
  CHECK_EQ_U(r.v5_frames[s1[0].first].off_kind, RQ_OFF_TEXT);
  CHECK_EQ_S(rq_text(&r, r.v5_frames[s1[0].first].text_off), "0xffffffffffffffffff");
  rq_free(&r);
}

TEST(symbolicate_bad_modules) {
  /* each fails alone, with the first problem found, where, and the fields as given */
  const char *body = "{\"frames\":[{\"module\":1,\"rva\":16},{\"module\":0,\"rva\":16},{\"module\":3,\"rva\":16},"
                     "{\"module\":2,\"token\":\"0x06000001\",\"il_offset\":0}],"
                     "\"modules\":[" M ","
                     "{\"debug_file\":\"a.pdb\",\"debug_id\":\"3773E3530B2E493882ECA7324B16C2D9-123456789\"},"
                     "{\"debug_file\":\"../x.pdb\",\"debug_id\":7,\"format\":\"elf\"},"
                     "[1],"
                     "{\"debug_file\":\"w.pdb\",\"debug_id\":\"3773e353-0b2e-4938-82ec-a7324b16c2d9\",\"format\":\"windows\"},"
                     "{\"debug_file\":\"p.pdb\",\"debug_id\":\"3773e353-0b2e-4938-82ec-a7324b16c2d9\",\"code_id\":\"5F1A2B3C1e000\"}]}";
  rq_request r;
  memset(&r, 0, sizeof r);
  rq_error e;
  rq_limits lim = {10, 10, 10, 10};
  CHECK_EQ_U(rq_parse_symbolicate(body, strlen(body), &lim, NULL, &r, &e), RQ_OK);
  CHECK_EQ_U(r.nmods, 6);
  CHECK(!r.mods[0].invalid);
  CHECK(r.mods[1].invalid);
  CHECK_EQ_S(rq_text(&r, r.mods[1].field_off), "modules[1].debug_id");
  CHECK(!strncmp(rq_text(&r, r.mods[1].why_off), "invalid debug_id: ", 18));
  CHECK_EQ_S(rq_text(&r, r.mods[1].gfile_off), "a.pdb");
  CHECK_EQ_S(rq_text(&r, r.mods[1].gid_off), "3773E3530B2E493882ECA7324B16C2D9-123456789");
  /* the format is read first */
  CHECK(r.mods[2].invalid);
  CHECK_EQ_S(rq_text(&r, r.mods[2].field_off), "modules[2].format");
  CHECK_EQ_S(rq_text(&r, r.mods[2].why_off), "format must be \"windows\" or \"portable\"");
  CHECK_EQ_S(rq_text(&r, r.mods[2].gfile_off), "../x.pdb");
  CHECK(rq_text(&r, r.mods[2].gid_off) == NULL); /* not a string: null */
  CHECK(r.mods[3].invalid);
  CHECK_EQ_S(rq_text(&r, r.mods[3].field_off), "modules[3]");
  CHECK_EQ_S(rq_text(&r, r.mods[3].why_off), "a module must be an object");
  CHECK(rq_text(&r, r.mods[3].gfile_off) == NULL);
  /* a GUID alone names a Portable PDB: refused when the format says windows */
  CHECK(r.mods[4].invalid);
  CHECK(strstr(rq_text(&r, r.mods[4].why_off), "no age after the GUID") != NULL);
  CHECK(!r.mods[5].invalid);
  CHECK(r.mods[5].no_age);
  CHECK_EQ_U(r.mods[5].id.format, ST_FORMAT_PORTABLE);
  CHECK_EQ_S(r.mods[5].id.code_id_text, "5F1A2B3C1e000");
  /* frames of a bad module are invalid, the others are not */
  CHECK((r.frames[0].flags & RQ_F_INVALID) && r.frames[0].why == RQ_WHY_MODULE);
  CHECK(!(r.frames[1].flags & RQ_F_INVALID));
  CHECK((r.frames[2].flags & RQ_F_INVALID) && r.frames[2].why == RQ_WHY_MODULE);
  CHECK((r.frames[3].flags & RQ_F_INVALID) && r.frames[3].why == RQ_WHY_MODULE);
  rq_free(&r);
}

/* The frames of body placed; returns the parse's result. */
static rq_result place(const char *body, rq_request *r) {
  memset(r, 0, sizeof *r);
  rq_error e;
  rq_limits lim = {10, 20, 10, 10};
  return rq_parse_symbolicate(body, strlen(body), &lim, NULL, r, &e);
}

#define IM "{\"debug_file\":\"a.pdb\",\"debug_id\":\"3773E3530B2E493882ECA7324B16C2D91\",\"image_addr\":\"0x7ff600000000\",\"image_size\":\"0x10000\"}"

TEST(symbolicate_placement) {
  rq_request r;
  /* absolute addresses: the RVA from image_addr, bounded by image_size */
  CHECK_EQ_U(place("{\"modules\":[" IM "," M "],\"frames\":["
                   "{\"module\":0,\"instruction_addr\":\"0x7ff600001a2b\"},"
                   "{\"module\":0,\"instruction_addr\":\"0x7ff5ffffffff\"},"
                   "{\"module\":0,\"instruction_addr\":\"0x7ff600010000\"},"
                   "{\"module\":1,\"instruction_addr\":16},"
                   "{\"module\":0,\"instruction_addr\":-1},"
                   "{\"module\":5,\"rva\":16},"
                   "{\"module\":-1,\"rva\":16}]}", &r),
             RQ_OK);
  CHECK_EQ_U(r.nframes, 7);
  CHECK(!(r.frames[0].flags & RQ_F_INVALID) && (r.frames[0].flags & RQ_F_HAS_RVA));
  CHECK_EQ_U(r.frames[0].rva, 0x1a2b);
  CHECK_EQ_U(r.frames[0].aux, 0x7ff600001a2bull);
  CHECK_EQ_S(rq_why_text(r.frames[1].why), "instruction_addr is below its module's image_addr");
  CHECK_EQ_S(rq_why_text(r.frames[2].why), "instruction_addr is past its module's image_addr + image_size");
  CHECK_EQ_S(rq_why_text(r.frames[3].why), "instruction_addr needs its module's image_addr");
  CHECK_EQ_S(rq_why_text(r.frames[4].why), "instruction_addr is negative or wider than 64 bits");
  CHECK(!(r.frames[4].flags & RQ_F_HAS_IADDR));
  CHECK((r.frames[5].flags & RQ_F_BAD_INDEX) && (r.frames[5].flags & RQ_F_INDEX_OK));
  CHECK_EQ_S(rq_why_text(r.frames[5].why), "module index is not in modules");
  CHECK((r.frames[6].flags & RQ_F_BAD_INDEX) && !(r.frames[6].flags & RQ_F_INDEX_OK));
  rq_free(&r);
  /* return addresses: all_but_first takes the first frame of each stack as the leaf */
  CHECK_EQ_U(place("{\"instruction_addr_adjustment\":\"all_but_first\",\"modules\":[" M "],\"frames\":["
                   "{\"module\":0,\"rva\":16,\"stack\":1},{\"module\":0,\"rva\":32},{\"module\":0,\"rva\":48,\"stack\":1},"
                   "{\"module\":0,\"rva\":64},{\"module\":0,\"rva\":80,\"adjust_instruction_addr\":false},"
                   "{\"module\":0,\"token\":\"0x06000001\",\"il_offset\":3}]}", &r),
             RQ_OK);
  CHECK(!(r.frames[0].flags & RQ_F_ADJUSTED)); /* leaf of stack 1 */
  CHECK(!(r.frames[1].flags & RQ_F_ADJUSTED)); /* leaf of stack 0 */
  CHECK(r.frames[2].flags & RQ_F_ADJUSTED);
  CHECK(r.frames[3].flags & RQ_F_ADJUSTED);
  CHECK(!(r.frames[4].flags & RQ_F_ADJUSTED)); /* the frame says so */
  CHECK(!(r.frames[5].flags & RQ_F_ADJUSTED)); /* managed: never */
  rq_free(&r);
  /* all, and the frame's own word; a return address at RVA 0 cannot be */
  CHECK_EQ_U(place("{\"instruction_addr_adjustment\":\"all\",\"modules\":[" M "],\"frames\":["
                   "{\"module\":0,\"rva\":16},{\"module\":0,\"rva\":0},{\"module\":0,\"rva\":0,\"adjust_instruction_addr\":false}]}",
                   &r),
             RQ_OK);
  CHECK(r.frames[0].flags & RQ_F_ADJUSTED);
  CHECK_EQ_S(rq_why_text(r.frames[1].why), "a return address cannot be its module's first byte (rva 0)");
  CHECK(!(r.frames[2].flags & (RQ_F_ADJUSTED | RQ_F_INVALID)));
  rq_free(&r);
  CHECK_EQ_U(place("{\"modules\":[" M "],\"frames\":[{\"module\":0,\"rva\":16,\"adjust_instruction_addr\":true},{\"module\":0,\"rva\":16}]}",
                   &r),
             RQ_OK);
  CHECK(r.frames[0].flags & RQ_F_ADJUSTED);
  CHECK(!(r.frames[1].flags & RQ_F_ADJUSTED)); /* "none" is the default */
  rq_free(&r);
}

TEST(v5_bad_modules_and_offsets) {
  const char *body = "{\"memoryMap\":[[\"a.pdb\",\"3773E3530B2E493882ECA7324B16C2D91\"],[\"a..pdb\",\"3773E3530B2E493882ECA7324B16C2D91\"],"
                     "[\"w.pdb\",\"3773e353-0b2e-4938-82ec-a7324b16c2d9\"]],"
                     "\"stacks\":[[[0,16],[1,\"0x10\"],[2,-1],[-1,5],[7,\"0x10000000000000000\"]]]}";
  rq_request r;
  memset(&r, 0, sizeof r);
  rq_error e;
  rq_limits lim = {10, 10, 10, 10};
  CHECK_EQ_U(rq_parse_v5(body, strlen(body), &lim, NULL, &r, &e), RQ_OK);
  CHECK_EQ_U(r.nmods, 3);
  CHECK(!r.mods[0].invalid);
  CHECK(r.mods[1].invalid);
  CHECK_EQ_S(rq_text(&r, r.mods[1].gfile_off), "a..pdb");
  CHECK(r.mods[2].invalid); /* v5 names Windows modules: a GUID alone is no id */
  CHECK(!r.mods[1].skip && !r.mods[2].skip);
  CHECK_EQ_U(r.nv5_frames, 5);
  CHECK_EQ_U(r.v5_frames[1].off_kind, RQ_OFF_OK);
  CHECK_EQ_U(r.v5_frames[1].offset, 16);
  CHECK_EQ_U(r.v5_frames[2].off_kind, RQ_OFF_NEG);
  CHECK_EQ_U(r.v5_frames[2].offset, 1);
  CHECK_EQ_U(r.v5_frames[3].module_index, (uint64_t)-1);
  CHECK_EQ_U(r.v5_frames[4].off_kind, RQ_OFF_TEXT);
  rq_free(&r);
  /* many jobs, one walked at a time */
  char big[65536];
  size_t n = (size_t)snprintf(big, sizeof big, "{\"jobs\":[");
  for (int i = 0; i < 600; i++)
    n += (size_t)snprintf(big + n, sizeof big - n, "%s{\"memoryMap\":[],\"stacks\":[[[0,%d]]]}", i ? "," : "", i);
  snprintf(big + n, sizeof big - n, "]}");
  rq_limits many = {10, 10, 1000, 1000};
  memset(&r, 0, sizeof r);
  CHECK_EQ_U(rq_parse_v5(big, strlen(big), &many, NULL, &r, &e), RQ_OK);
  CHECK_EQ_U(r.njobs, 600);
  CHECK_EQ_U(r.jobs[599].nstacks, 1);
  CHECK_EQ_U(r.v5_frames[r.stacks[r.jobs[599].stack_first].first].offset, 599);
  rq_free(&r);
}

TEST(budget) {
  /* 400 frames are 12.8 KB of arrays: a 8 KiB budget cannot take them */
  char body[16384];
  size_t n = (size_t)snprintf(body, sizeof body, "{\"modules\":[" M "],\"frames\":[");
  for (int i = 0; i < 400; i++)
    n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"module\":0,\"rva\":%d}", i ? "," : "", i);
  n += (size_t)snprintf(body + n, sizeof body - n, "]}");
  rq_limits lim = {10, 1000, 1000, 10};
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
  RUN(symbolicate_bad_modules);
  RUN(symbolicate_placement);
  RUN(v5_bad_modules_and_offsets);
  RUN(budget);
  return test_summary();
}
