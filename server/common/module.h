/*
 * module.h - naming a module: debug file, debug id, code file and code id, as
 * the contract (docs/contract.md, "Modules") defines them, plus the symbol-server
 * keys derived from them.  Pure functions; no allocation.
 */
#ifndef PDBSYM_MODULE_H
#define PDBSYM_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symtab.h"

#define MODULE_NAME_MAX 255

typedef struct {
  char debug_file[MODULE_NAME_MAX + 1]; /* last path component, validated */
  uint8_t guid[16];                     /* on-disk GUID layout (Data1..3 little-endian) */
  uint32_t age;                         /* ignored for Portable PDBs */
  st_format format;                     /* ST_FORMAT_UNKNOWN: try both */
  char code_file[MODULE_NAME_MAX + 1];  /* "" when absent */
  uint32_t code_timestamp;              /* valid when has_code_id */
  uint32_t code_size;
  bool has_code_id;
  char code_id_text[17];                /* the code id as the caller spelt it (9 to 16 hex
                                           digits; stores are probed in that casing too),
                                           "" when it came from a PE */
} module_id;

/* Reduces a debug or code file name to its last component (after '/' or '\')
 * and validates it: not empty, not "." or "..", no "..", no control
 * characters, no ':' '*' '?' '"' '<' '>' '|' '%', at most 255 bytes.
 * On failure returns false and sets *why to a static message. */
bool module_parse_file_name(const char *in, char *out, size_t cap, const char **why);

/* A debug id in every form the ecosystem prints, case-insensitive:
 *   3773e353-0b2e-4938-82ec-a7324b16c2d9-1   GUID-age (pdbsym's answers, Sentry's debugid)
 *   3773E3530B2E493882ECA7324B16C2D91        32 hex digits + age (Breakpad, symstore's key)
 *   3773e3530b2e493882eca7324b16c2d9-1       32 hex digits, '-', age
 *   3773e353-0b2e-4938-82ec-a7324b16c2d9     a GUID alone (no age: a Portable PDB's id)
 *   3773e3530b2e493882eca7324b16c2d9         the same as 32 hex digits
 * The age is 1 to 8 hex digits.  *has_age (may be NULL) says whether one was
 * given; *age is 0 when not.  On failure *why is a static message naming the
 * problem ("debug_id: the age is longer than 8 hex digits"). */
bool module_parse_debug_id_ex(const char *in, uint8_t guid[16], uint32_t *age, bool *has_age,
                              const char **why);

/* module_parse_debug_id_ex that requires an age (MODULE_NO_AGE otherwise). */
bool module_parse_debug_id(const char *in, uint8_t guid[16], uint32_t *age, const char **why);

/* Sets m->guid and m->age from a debug id, by the rule for an id without an
 * age: it names a Portable PDB (whose key ignores the age), so m->format
 * becomes ST_FORMAT_PORTABLE when it was unknown, and the id is refused
 * (MODULE_NO_AGE) when m->format is ST_FORMAT_WINDOWS: a Windows PDB's key is
 * its GUID and age, and taking a missing age as 0 (or 1) would look up a file
 * the client never named.  Set m->format before calling. */
bool module_set_debug_id(module_id *m, const char *in, const char **why);

/* module_set_debug_id that also says whether the id gave an age (*given_age;
 * false on failure), so that a caller needs no second parse for it. */
bool module_set_debug_id_ex(module_id *m, const char *in, bool *given_age, const char **why);

#define MODULE_NO_AGE                                                                          \
  "debug_id: no age after the GUID; a Windows PDB is named by GUID and age "                  \
  "(3773e353-0b2e-4938-82ec-a7324b16c2d9-1 or 3773E3530B2E493882ECA7324B16C2D91); "            \
  "a GUID alone names a Portable PDB"

/* "5F1A2B3C1e000": 8 hex digits of TimeDateStamp then SizeOfImage in hex. */
bool module_parse_code_id(const char *in, uint32_t *timestamp, uint32_t *size, const char **why);

/* 32 uppercase hex digits in symbol-server order (Data1, Data2, Data3, bytes). */
void module_guid_hex(const uint8_t guid[16], char out[33]);

/* Canonical debug id "3773e353-0b2e-4938-82ec-a7324b16c2d9-1" (lowercase). */
void module_debug_id(const uint8_t guid[16], uint32_t age, char out[48]);

/* Symbol-server key without the file part: "<GUID><age hex>" for Windows,
 * "<GUID>FFFFFFFF" for Portable.  out must hold 42 bytes. */
void module_index_key(const module_id *m, st_format format, char out[42]);

/* Cache key: "<debug_file lowercase>/<index key>"; out must hold 300 bytes. */
void module_cache_key(const module_id *m, st_format format, char *out, size_t cap);

/* Cache key of a module's PE image (for negative entries: an image no source
 * has): "<code_file lowercase>/<TIMESTAMP as 8 hex digits><SizeOfImage in
 * hex>", upper case; "" when m has no code_file or code id.  It cannot meet
 * a PDB's key (module_cache_key: an index key of 33 hex digits or more).  out
 * must hold 300 bytes. */
void module_image_key(const module_id *m, char *out, size_t cap);

#endif
