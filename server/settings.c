#include "settings.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CACHE_DIR ".pdbsym-cache"
#define DEFAULT_CACHE_MAX ((uint64_t)2 << 30)

bool settings_parse_bytes(const char *s, uint64_t *out) {
  if (!s || !isdigit((unsigned char)*s))
    return false;
  uint64_t v = 0;
  while (isdigit((unsigned char)*s)) {
    uint64_t d = (uint64_t)(*s - '0');
    if (v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
    s++;
  }
  unsigned shift = 0;
  switch (toupper((unsigned char)*s)) {
  case 'K': shift = 10; s++; break;
  case 'M': shift = 20; s++; break;
  case 'G': shift = 30; s++; break;
  case 'T': shift = 40; s++; break;
  default: break;
  }
  if (*s == 'i' || *s == 'I')
    s++;
  if (*s == 'B' || *s == 'b')
    s++;
  if (*s != '\0')
    return false;
  if (shift && v > (UINT64_MAX >> shift))
    return false;
  *out = v << shift;
  return true;
}

void settings_defaults(settings *s) {
  memset(s, 0, sizeof *s);
  s->cache_dir = DEFAULT_CACHE_DIR;
  s->cache_max_bytes = DEFAULT_CACHE_MAX;
  const char *v;
  if ((v = getenv("PDBSYM_CACHE_DIR")) && *v)
    s->cache_dir = v;
  if ((v = getenv("PDBSYM_SYMBOL_PATH")) && *v)
    s->symbol_path = v;
  if ((v = getenv("PDBSYM_CACHE_MAX_BYTES")) && *v) {
    uint64_t b;
    if (settings_parse_bytes(v, &b))
      s->cache_max_bytes = b;
    else
      fprintf(stderr, "pdbsym: ignoring PDBSYM_CACHE_MAX_BYTES=%s (expected a number like 2G)\n", v);
  }
}

int settings_flag(settings *s, int argc, char **argv, int i) {
  const char *a = argv[i];
  const char *val = NULL;
  static const char *const with_value[] = {"--cache-dir", "--symbol-path", "--cache-max-bytes"};
  for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) {
    size_t n = strlen(with_value[k]);
    if (strncmp(a, with_value[k], n) != 0 || (a[n] != '\0' && a[n] != '='))
      continue;
    int used = 1;
    if (a[n] == '=') {
      val = a + n + 1;
    } else if (i + 1 < argc) {
      val = argv[i + 1];
      used = 2;
    } else {
      fprintf(stderr, "pdbsym: %s needs a value\n", with_value[k]);
      return -1;
    }
    if (k == 0) {
      s->cache_dir = val;
    } else if (k == 1) {
      s->symbol_path = val;
    } else if (!settings_parse_bytes(val, &s->cache_max_bytes)) {
      fprintf(stderr, "pdbsym: --cache-max-bytes takes a size like 500M or 2G, not '%s'\n", val);
      return -1;
    }
    return used;
  }
  if (!strcmp(a, "--offline")) {
    s->offline = true;
    return 1;
  }
  return 0;
}

const char *settings_help(void) {
  return "  --cache-dir DIR     cache folder (env PDBSYM_CACHE_DIR, default ./.pdbsym-cache)\n"
         "  --symbol-path PATH  symbol sources, _NT_SYMBOL_PATH syntax (env PDBSYM_SYMBOL_PATH,\n"
         "                      default Microsoft's public symbol server)\n"
         "  --cache-max-bytes N cap on the cache's size, e.g. 2G (env PDBSYM_CACHE_MAX_BYTES)\n"
         "  --offline           use the cache and local folders only\n";
}

void settings_engine_config(const settings *s, engine_config *ec) {
  memset(ec, 0, sizeof *ec);
  ec->cache_dir = s->cache_dir;
  ec->symbol_path = s->symbol_path;
  ec->cache_max_bytes = s->cache_max_bytes;
  ec->offline = s->offline;
}
