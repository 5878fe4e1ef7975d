/*
 * fetch_verify.c - is a downloaded file the module asked for?  The one
 * identity check behind both the engine's downloads and `pdbsym fetch`
 * (see fetch_identity in fetch.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "filemap.h"
#include "loader.h"
#include "pe.h"

/* A Portable PDB is named by its GUID alone; a Windows PDB by GUID and age,
 * which a PDB writes twice (DBI and info stream) and tools match on either. */
static bool ident_matches(const module_id *m, st_format fmt, const st_ident *id) {
  if (memcmp(id->guid, m->guid, 16) != 0)
    return false;
  if (fmt != ST_FORMAT_UNKNOWN && id->format != fmt)
    return false;
  if (id->format == ST_FORMAT_PORTABLE)
    return true;
  return id->format == ST_FORMAT_WINDOWS && (id->age == m->age || id->pdb_age == m->age);
}

static bool check_pdb(fetch_identity *c, const filemap *fm, ps_diag *diag) {
  symtab *st = calloc(1, sizeof *st);
  if (!st) {
    ps_diag_set(diag, PS_E_NOMEM, "PDB identity", (size_t)-1, "out of memory");
    return false;
  }
  ps_budget budget;
  ps_budget_init(&budget, PS_DEFAULT_BUDGET);
  st_init(st, &budget);
  ps_diag d;
  ps_diag_clear(&d);
  ps_err rc = loader_read(fm->data, fm->len, NULL, 0, &budget, st, &d);
  st->budget = NULL;
  bool ok = false;
  if (rc != PS_E_OK) {
    char msg[256];
    c->malformed = true;
    snprintf(c->error, sizeof c->error, "%s", ps_diag_format(&d, msg, sizeof msg));
    ps_diag_set(diag, rc, d.where, d.offset, "%s", d.detail);
  } else if (!ident_matches(c->m, c->fmt, &st->ident)) {
    char want[48], got[48];
    module_debug_id(c->m->guid, c->m->age, want);
    module_debug_id(st->ident.guid, st->ident.age, got);
    ps_diag_set(diag, PS_E_MISMATCH, "PDB identity", (size_t)-1,
                "the server's file is %s, not the requested %s", got, want);
  } else {
    ok = true;
  }
  if (ok && c->keep) {
    if (c->st) {
      st_free(c->st);
      free(c->st);
    }
    c->st = st;
  } else {
    st_free(st);
    free(st);
  }
  return ok;
}

static bool check_image(const fetch_identity *c, const filemap *fm, ps_diag *diag) {
  pe_info info;
  if (pe_parse(fm->data, fm->len, &info, diag) != PS_E_OK)
    return false;
  if (info.timestamp == c->m->code_timestamp && info.size_of_image == c->m->code_size)
    return true;
  ps_diag_set(diag, PS_E_MISMATCH, "PE identity", (size_t)-1,
              "the served image is %08X%X, not the requested %08X%X", info.timestamp,
              info.size_of_image, c->m->code_timestamp, c->m->code_size);
  return false;
}

bool fetch_verify_identity(void *ctx, const char *path, ps_diag *diag) {
  fetch_identity *c = ctx;
  filemap fm;
  if (filemap_open(&fm, path, c->max_bytes, diag) != PS_E_OK)
    return false;
  bool ok = c->image ? check_image(c, &fm, diag) : check_pdb(c, &fm, diag);
  filemap_close(&fm);
  return ok;
}
