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

/* true when the file starts like a PDB (MSF 7 or 2, or Portable "BSJB") */
static bool pdb_signature(const uint8_t *d, size_t n) {
  static const char msf7[] = "Microsoft C/C++ MSF 7.00\r\n\x1a" "DS";
  static const char msf2[] = "Microsoft C/C++ program database 2.00\r\n\x1a" "JG";
  return (n >= sizeof msf7 - 1 && !memcmp(d, msf7, sizeof msf7 - 1)) ||
         (n >= sizeof msf2 - 1 && !memcmp(d, msf2, sizeof msf2 - 1)) ||
         (n >= 4 && !memcmp(d, "BSJB", 4));
}

static bool check_pdb(fetch_identity *c, st_format fmt, bool clean, const filemap *fm,
                      ps_diag *diag) {
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
    char msg[200];
    bool signature = pdb_signature(fm->data, fm->len);
    c->malformed = true;
    /* an HTML page, an error document, a body cut short without a length: the
     * network's fault, maybe not the file's (the engine tries it again sooner) */
    if (!clean || !signature)
      c->suspect = true;
    snprintf(c->error, sizeof c->error, "%s%s", ps_diag_format(&d, msg, sizeof msg),
             !signature ? " (the download is not a PDB)"
             : !clean   ? " (the download may be incomplete)"
                        : "");
    ps_diag_set(diag, rc, d.where, d.offset, "%s", d.detail);
  } else if (!ident_matches(c->m, fmt, &st->ident)) {
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

bool fetch_verify_identity(void *ctx, const fetch_file *file, ps_diag *diag) {
  fetch_identity *c = ctx;
  filemap fm;
  if (filemap_open(&fm, file->path, c->max_bytes, diag) != PS_E_OK)
    return false;
  /* a lookup of both keys tells which one the file was found under */
  st_format fmt = c->fmt != ST_FORMAT_UNKNOWN ? c->fmt : file->format;
  bool ok = c->image ? check_image(c, &fm, diag) : check_pdb(c, fmt, file->clean, &fm, diag);
  filemap_close(&fm);
  return ok;
}
