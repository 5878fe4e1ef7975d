#include "module.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

bool module_parse_file_name(const char *in, char *out, size_t cap, const char **why) {
  const char *dummy;
  if (!why)
    why = &dummy;
  if (!in) {
    *why = "missing";
    return false;
  }
  const char *last = in;
  for (const char *p = in; *p; p++)
    if (*p == '/' || *p == '\\')
      last = p + 1;
  size_t n = strlen(last);
  if (n == 0) {
    *why = "empty file name";
    return false;
  }
  if (n > MODULE_NAME_MAX) {
    *why = "file name longer than 255 bytes";
    return false;
  }
  if (strstr(last, "..") || !strcmp(last, ".")) {
    *why = "file name contains '..'";
    return false;
  }
  for (const char *p = last; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c < 0x20 || c == 0x7f) {
      *why = "file name contains a control character";
      return false;
    }
    if (c == ':' || c == '*' || c == '?' || c == '"' || c == '<' || c == '>' || c == '|' ||
        c == '%') {
      *why = "file name contains a reserved character";
      return false;
    }
  }
  if (n + 1 > cap) {
    *why = "file name too long";
    return false;
  }
  memcpy(out, last, n + 1);
  return true;
}

/* ASCII only, whatever the locale: 'A'-'F' | 0x20 are 'a'-'f', and no other
 * byte becomes one of them */
static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c |= 0x20;
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* The forms, case-insensitive (module.h lists them with examples):
 *   GUID as 8-4-4-4-12, then nothing or '-' and the age;
 *   GUID as 32 digits, then nothing, the age, or '-' and the age.
 * Each failure has its own message, naming what is wrong where. */
bool module_parse_debug_id_ex(const char *in, uint8_t guid[16], uint32_t *age, bool *has_age,
                              const char **why) {
  const char *dummy;
  if (!why)
    why = &dummy;
  if (!in) {
    *why = "missing";
    return false;
  }
  if (!*in) {
    *why = "debug_id: empty";
    return false;
  }
  char hex[32]; /* the GUID's digits' values, 0 to 15 */
  size_t nh = 0;
  const char *p = in;
  size_t n = strlen(in);
  bool dashed = n > 8 && in[8] == '-';
  if (dashed) {
    static const int groups[5] = {8, 4, 4, 4, 12};
    for (int g = 0; g < 5; g++) {
      for (int k = 0; k < groups[g]; k++, p++) {
        if (*p == '\0') {
          *why = "debug_id: the GUID is cut short (expected 8-4-4-4-12 hex digits)";
          return false;
        }
        if (*p == '-') {
          *why = "debug_id: the GUID's dashes must split it 8-4-4-4-12";
          return false;
        }
        int v = hexval((unsigned char)*p);
        if (v < 0) {
          *why = "debug_id: not a hex digit in the GUID";
          return false;
        }
        hex[nh++] = (char)v;
      }
      if (g < 4) {
        if (*p == '\0') {
          *why = "debug_id: the GUID is cut short (expected 8-4-4-4-12 hex digits)";
          return false;
        }
        if (*p != '-') {
          *why = "debug_id: the GUID's dashes must split it 8-4-4-4-12";
          return false;
        }
        p++;
      }
    }
    if (*p != '\0' && *p != '-') {
      *why = "debug_id: expected '-' and the age after the 8-4-4-4-12 GUID";
      return false;
    }
  } else {
    for (; nh < 32; nh++, p++) {
      if (*p == '\0') {
        *why = "debug_id: shorter than a GUID (32 hex digits, then the age in hex)";
        return false;
      }
      int v = hexval((unsigned char)*p);
      if (v < 0) {
        *why = *p == '-' ? "debug_id: a dash inside the GUID: write it 8-4-4-4-12 or as 32 hex digits"
                         : "debug_id: not a hex digit in the GUID";
        return false;
      }
      hex[nh] = (char)v;
    }
  }
  bool dash = *p == '-';
  if (dash) {
    p++;
    if (*p == '\0') {
      *why = "debug_id: nothing after the '-' that should start the age";
      return false;
    }
  }
  uint64_t a = 0;
  size_t ndig = 0;
  for (; *p; p++, ndig++) {
    int v = hexval((unsigned char)*p);
    if (v < 0) {
      *why = "debug_id: the age after the GUID must be hex digits";
      return false;
    }
    if (ndig == 8) {
      *why = dash || dashed ? "debug_id: the age is longer than 8 hex digits"
                            : "debug_id: more than 8 hex digits after the GUID's 32 (the age "
                              "is at most 8)";
      return false;
    }
    a = a * 16 + (uint64_t)v;
  }
  uint8_t b[16];
  for (int i = 0; i < 16; i++)
    b[i] = (uint8_t)(hex[2 * i] * 16 + hex[2 * i + 1]); /* (the digits' values) */
  /* text order -> on-disk layout: Data1 (4), Data2 (2), Data3 (2) little-endian */
  guid[0] = b[3]; guid[1] = b[2]; guid[2] = b[1]; guid[3] = b[0];
  guid[4] = b[5]; guid[5] = b[4];
  guid[6] = b[7]; guid[7] = b[6];
  memcpy(guid + 8, b + 8, 8);
  *age = (uint32_t)a;
  if (has_age)
    *has_age = ndig > 0;
  return true;
}

bool module_parse_debug_id(const char *in, uint8_t guid[16], uint32_t *age, const char **why) {
  bool has_age = false;
  if (!module_parse_debug_id_ex(in, guid, age, &has_age, why))
    return false;
  if (!has_age) {
    if (why)
      *why = MODULE_NO_AGE;
    return false;
  }
  return true;
}

bool module_set_debug_id(module_id *m, const char *in, const char **why) {
  bool has_age;
  return module_set_debug_id_ex(m, in, &has_age, why);
}

bool module_set_debug_id_ex(module_id *m, const char *in, bool *given_age, const char **why) {
  bool has_age = false;
  *given_age = false;
  if (!module_parse_debug_id_ex(in, m->guid, &m->age, &has_age, why))
    return false;
  *given_age = has_age;
  if (has_age)
    return true;
  if (m->format == ST_FORMAT_WINDOWS) {
    if (why)
      *why = MODULE_NO_AGE;
    return false;
  }
  m->format = ST_FORMAT_PORTABLE; /* only a Portable PDB is named by its GUID alone */
  m->age = 0;
  return true;
}

bool module_parse_code_id(const char *in, uint32_t *timestamp, uint32_t *size, const char **why) {
  const char *dummy;
  if (!why)
    why = &dummy;
  size_t n = in ? strlen(in) : 0;
  if (n < 9 || n > 16) {
    *why = "code_id: expected 8 hex digits of TimeDateStamp then SizeOfImage in hex";
    return false;
  }
  uint32_t ts = 0, sz = 0;
  for (size_t i = 0; i < n; i++) {
    int v = hexval((unsigned char)in[i]);
    if (v < 0) {
      *why = "code_id: not hexadecimal";
      return false;
    }
    if (i < 8)
      ts = ts * 16 + (uint32_t)v;
    else
      sz = sz * 16 + (uint32_t)v;
  }
  *timestamp = ts;
  *size = sz;
  return true;
}

/* The GUID's bytes in symbol-server order: Data1..3 byte-swapped to big-endian. */
static const uint8_t guid_order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};

/* Two hex digits per byte of g in guid_order into out (no NUL); digits is
 * "0123456789ABCDEF" or its lowercase; a dash before bytes 4, 6, 8, 10 when
 * dashes.  Returns the characters written.  (No snprintf: an answer names
 * every module it was asked, and these run per module and request.) */
static size_t guid_digits(const uint8_t g[16], const char *digits, bool dashes, char *out) {
  size_t o = 0;
  for (int i = 0; i < 16; i++) {
    if (dashes && (i == 4 || i == 6 || i == 8 || i == 10))
      out[o++] = '-';
    uint8_t b = g[guid_order[i]];
    out[o++] = digits[b >> 4];
    out[o++] = digits[b & 15];
  }
  return o;
}

/* v in hex without leading zeros ("0" for 0) into out; returns the length. */
static size_t hex_u32(uint32_t v, const char *digits, char *out) {
  char tmp[8];
  size_t n = 0;
  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v);
  for (size_t i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  return n;
}

static const char HEX_UP[] = "0123456789ABCDEF", HEX_LOW[] = "0123456789abcdef";

void module_guid_hex(const uint8_t g[16], char out[33]) {
  out[guid_digits(g, HEX_UP, false, out)] = '\0';
}

void module_debug_id(const uint8_t g[16], uint32_t age, char out[48]) {
  size_t o = guid_digits(g, HEX_LOW, true, out);
  out[o++] = '-';
  out[o + hex_u32(age, HEX_LOW, out + o)] = '\0';
}

void module_index_key(const module_id *m, st_format format, char out[42]) {
  size_t o = guid_digits(m->guid, HEX_UP, false, out);
  if (format == ST_FORMAT_PORTABLE) {
    memcpy(out + o, "FFFFFFFF", 9);
    return;
  }
  out[o + hex_u32(m->age, HEX_UP, out + o)] = '\0';
}

void module_cache_key(const module_id *m, st_format format, char *out, size_t cap) {
  char idx[42];
  module_index_key(m, format, idx);
  char lower[MODULE_NAME_MAX + 1];
  size_t i = 0;
  for (; m->debug_file[i] && i < MODULE_NAME_MAX; i++)
    lower[i] = (char)tolower((unsigned char)m->debug_file[i]);
  lower[i] = '\0';
  snprintf(out, cap, "%s/%s", lower, idx);
}

void module_image_key(const module_id *m, char *out, size_t cap) {
  if (!cap)
    return;
  out[0] = '\0';
  if (!m->code_file[0] || !m->has_code_id)
    return;
  char lower[MODULE_NAME_MAX + 1];
  size_t i = 0;
  for (; m->code_file[i] && i < MODULE_NAME_MAX; i++)
    lower[i] = (char)tolower((unsigned char)m->code_file[i]);
  lower[i] = '\0';
  snprintf(out, cap, "%s/%08X%X", lower, (unsigned)m->code_timestamp, (unsigned)m->code_size);
}
