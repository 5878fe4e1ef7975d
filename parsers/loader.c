#include "loader.h"

#include <stdlib.h>
#include <string.h>

#include "pdb.h"
#include "pe.h"
#include "ppdb.h"

static const char msf_old_magic[] = "Microsoft C/C++ program database 2.00";

load_kind loader_sniff(const uint8_t *data, size_t len) {
  if (!data)
    return LOAD_UNKNOWN;
  if (pdb_is_msf(data, len))
    return LOAD_MSF;
  if (len >= sizeof msf_old_magic - 1 && !memcmp(data, msf_old_magic, sizeof msf_old_magic - 1))
    return LOAD_MSF_OLD;
  if (ppdb_is_metadata(data, len))
    return LOAD_PORTABLE;
  if (pe_is_image(data, len))
    return LOAD_PE;
  return LOAD_UNKNOWN;
}

const char *loader_kind_name(load_kind k) {
  switch (k) {
  case LOAD_MSF: return "windows";
  case LOAD_MSF_OLD: return "windows-2.00";
  case LOAD_PORTABLE: return "portable";
  case LOAD_PE: return "pe";
  default: return "unknown";
  }
}

ps_err loader_read(const uint8_t *data, size_t len, const uint8_t *image, size_t image_len,
                   ps_budget *budget, symtab *st, ps_diag *diag) {
  ps_err rc;
  switch (loader_sniff(data, len)) {
  case LOAD_MSF:
    rc = pdb_read(data, len, budget, st, diag);
    break;
  case LOAD_MSF_OLD:
    return ps_diag_set(diag, PS_E_UNSUPPORTED, "PDB header", 0,
                       "the old 'program database 2.00' format is not supported");
  case LOAD_PORTABLE:
    rc = ppdb_read(data, len, budget, st, diag);
    break;
  case LOAD_PE: {
    /* the inflated PDB and what is read from it share the image's allowance */
    size_t cap = ps_budget_limit(budget, ps_input_allowance(len));
    uint8_t *pdb = NULL;
    size_t pdb_len = 0;
    rc = pe_embedded_pdb(data, len, LOADER_MAX_EMBEDDED, budget, &pdb, &pdb_len, diag);
    if (rc == PS_E_OK) {
      rc = ppdb_read(pdb, pdb_len, budget, st, diag);
      free(pdb);
      ps_budget_release(budget, pdb_len);
    }
    ps_budget_restore(budget, cap);
    if (rc == PS_E_NOT_FOUND) {
      ps_diag_clear(diag);
      return ps_diag_set(diag, PS_E_NOT_FOUND, "PE debug directory", (size_t)-1,
                         "the image has no embedded Portable PDB; give its PDB instead");
    }
    if (rc != PS_E_OK)
      return rc;
    if (rc == PS_E_OK && !image) {
      image = data;
      image_len = len;
    }
    break;
  }
  default:
    return ps_diag_set(diag, PS_E_UNSUPPORTED, "file header", 0,
                       "not a Windows PDB, Portable PDB or PE image");
  }
  if (rc != PS_E_OK)
    return rc;
  if (image) {
    ps_diag d2;
    ps_diag_clear(&d2);
    /* names are a bonus: an image without metadata leaves the PDB's names */
    ps_err nr = pe_method_names(image, image_len, budget, st, &d2);
    if (nr != PS_E_OK && nr != PS_E_NOT_FOUND)
      return ps_diag_set(diag, nr, "image", d2.offset, "%s", d2.detail);
  }
  return st_finish(st);
}
