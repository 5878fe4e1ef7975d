/*
 * module.h - naming a module: debug file, debug id, code file and code id, as
 * the contract (CONTRACT.md, "Modules") defines them, plus the symbol-server
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
} module_id;

/* Reduces a debug or code file name to its last component (after '/' or '\')
 * and validates it: not empty, not "." or "..", no "..", no control
 * characters, no ':' '*' '?' '"' '<' '>' '|' '%', at most 255 bytes.
 * On failure returns false and sets *why to a static message. */
bool module_parse_file_name(const char *in, char *out, size_t cap, const char **why);

/* "3773e353-0b2e-4938-82ec-a7324b16c2d9-1" or "3773E3530B2E493882ECA7324B16C2D91"
 * (case-insensitive; age in hex, may be absent in the 32-hex form = 0). */
bool module_parse_debug_id(const char *in, uint8_t guid[16], uint32_t *age, const char **why);

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

#endif
