/*
 * msf.c - MSF 7.00 container: superblock, stream directory, streams.
 * See msf.h for the layout; the checks follow the order of LLVM's
 * MSFCommon.cpp validateSuperBlock (each failure with its own message).
 */
#include "msf.h"

#include <stdlib.h>
#include <string.h>

/* LLVM docs/PDB/MsfFile.rst: the 32-byte magic of MSF 7.00 */
static const char msf7_magic[32] = "Microsoft C/C++ MSF 7.00\r\n\x1a" "DS\0\0";
/* the older format (VC 6 and before): "Microsoft C/C++ program database 2.00\r\n\x1aJG\0\0" */
static const char pdb2_magic[] = "Microsoft C/C++ program database 2.00\r\n\x1a" "JG";

/* superblock: magic + six u32 fields */
enum { MSF_SUPERBLOCK_SIZE = 32 + 6 * 4 };

bool msf_is_msf7(const uint8_t *data, size_t len) {
  return data && len >= sizeof msf7_magic && memcmp(data, msf7_magic, sizeof msf7_magic) == 0;
}

bool msf_is_pdb2(const uint8_t *data, size_t len) {
  size_t n = sizeof pdb2_magic - 1;
  return data && len >= n && memcmp(data, pdb2_magic, n) == 0;
}

static bool valid_block_size(uint32_t bs) {
  /* MSF 7.00 writers use 512..8192 (the /PDBPAGESIZE option); LLVM accepts
   * powers of two up to 32768 */
  return bs >= 512 && bs <= 32768 && (bs & (bs - 1)) == 0;
}

static uint32_t blocks_for(uint32_t bytes, uint32_t bs) {
  return (uint32_t)(((uint64_t)bytes + bs - 1) / bs);
}

static bool block_ok(const msf_file *m, uint32_t b) {
  return b < m->num_blocks && (uint64_t)(b + 1ull) * m->block_size <= m->len;
}

void msf_close(msf_file *m) {
  if (!m)
    return;
  if (m->sizes)
    ps_budget_release(m->budget, (size_t)m->num_streams * 2 * sizeof(uint32_t) +
                                     m->nblocks * sizeof(uint32_t));
  free(m->sizes);
  free(m->first);
  free(m->blocks);
  m->sizes = m->first = m->blocks = NULL;
  m->num_streams = 0;
  m->nblocks = 0;
}

ps_err msf_open(msf_file *m, const uint8_t *data, size_t len, ps_budget *budget,
                ps_diag *diag) {
  memset(m, 0, sizeof *m);
  m->data = data;
  m->len = len;
  m->budget = budget;
  if (msf_is_pdb2(data, len))
    return ps_diag_set(diag, PS_E_UNSUPPORTED, "MSF superblock", 0,
                       "PDB 2.00 (\"Microsoft C/C++ program database 2.00\", VC6 era) "
                       "is not supported; only MSF 7.00");
  if (len < MSF_SUPERBLOCK_SIZE)
    return ps_diag_set(diag, PS_E_TRUNCATED, "MSF superblock", 0,
                       "file is %zu bytes, shorter than the 56-byte superblock", len);
  if (!msf_is_msf7(data, len)) {
    const char *what = "";
    if (data[0] == 'M' && data[1] == 'Z')
      what = " (the file is a PE image: MZ)";
    else if (memcmp(data, "BSJB", 4) == 0)
      what = " (the file is ECMA-335 metadata: a Portable PDB?)";
    else if (memcmp(data, "MSCF", 4) == 0)
      what = " (the file is a CAB archive: a compressed .pd_?)";
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF superblock", 0,
                       "no \"Microsoft C/C++ MSF 7.00\" magic%s", what);
  }
  ps_reader r;
  rd_init(&r, data, len);
  rd_skip(&r, 32, "MSF magic");
  uint32_t bs = rd_u32(&r, "MSF BlockSize");
  uint32_t fpm = rd_u32(&r, "MSF FreeBlockMapBlock");
  uint32_t nblocks = rd_u32(&r, "MSF NumBlocks");
  uint32_t ndir = rd_u32(&r, "MSF NumDirectoryBytes");
  rd_u32(&r, "MSF Unknown");
  uint32_t map_addr = rd_u32(&r, "MSF BlockMapAddr");
  if (!rd_ok(&r))
    return rd_to_diag(&r, diag);
  if (!valid_block_size(bs))
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF superblock", 32,
                       "block size %u is not a power of two in 512..32768", bs);
  if (fpm != 1 && fpm != 2)
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF superblock", 36,
                       "free block map at block %u, not 1 or 2", fpm);
  if (map_addr == 0)
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF superblock", 52,
                       "block map address is block 0 (reserved for the superblock)");
  if (map_addr >= nblocks)
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF superblock", 52,
                       "block map address %u is not below NumBlocks %u", map_addr, nblocks);
  uint32_t ndirblocks = blocks_for(ndir, bs);
  if (ndirblocks > bs / 4)
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF superblock", 44,
                       "directory of %u bytes needs %u blocks, more than one block map holds",
                       ndir, ndirblocks);
  if (ndir < 4)
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF superblock", 44,
                       "directory of %u bytes cannot hold a stream count", ndir);
  /* the directory is made of the file's own blocks, each used once: it
   * cannot be larger than the file (checked before it is allocated) */
  if (ndir > len)
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF superblock", 44,
                       "directory of %u bytes is larger than the %zu-byte file", ndir, len);
  m->block_size = bs;
  m->num_blocks = nblocks;
  if (!block_ok(m, map_addr))
    return ps_diag_set(diag, PS_E_TRUNCATED, "MSF block map", (size_t)map_addr * bs,
                       "block map block %u lies past the end of the %zu-byte file",
                       map_addr, len);

  /* assemble the directory into one buffer */
  ps_err e = PS_E_OK;
  uint8_t *dir = ps_alloc_array(budget, ndir, 1, &e);
  if (!dir)
    return ps_diag_set(diag, e, "MSF directory", 44, "directory of %u bytes", ndir);
  const uint8_t *map = data + (size_t)map_addr * bs;
  for (uint32_t i = 0; i < ndirblocks; i++) {
    uint32_t b = (uint32_t)map[i * 4] | (uint32_t)map[i * 4 + 1] << 8 |
                 (uint32_t)map[i * 4 + 2] << 16 | (uint32_t)map[i * 4 + 3] << 24;
    if (!block_ok(m, b)) {
      free(dir);
      ps_budget_release(budget, ndir);
      return ps_diag_set(diag, b < nblocks ? PS_E_TRUNCATED : PS_E_CORRUPT, "MSF block map",
                         (size_t)map_addr * bs + i * 4u,
                         "directory block %u (entry %u) is outside the file", b, i);
    }
    uint32_t take = ndir - i * bs < bs ? ndir - i * bs : bs;
    memcpy(dir + (size_t)i * bs, data + (size_t)b * bs, take);
  }

  ps_reader d;
  rd_init(&d, dir, ndir);
  uint32_t nstreams = rd_u32(&d, "MSF directory NumStreams");
  if ((uint64_t)nstreams * 4 > rd_left(&d)) {
    free(dir);
    ps_budget_release(budget, ndir);
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF directory", 0,
                       "%u streams do not fit in a %u-byte directory", nstreams, ndir);
  }
  m->sizes = ps_alloc_array(budget, nstreams ? nstreams : 1, sizeof *m->sizes, &e);
  m->first = m->sizes ? ps_alloc_array(budget, nstreams ? nstreams : 1, sizeof *m->first, &e)
                      : NULL;
  if (!m->first) {
    free(dir);
    ps_budget_release(budget, ndir);
    free(m->sizes);
    m->sizes = NULL;
    return ps_diag_set(diag, e, "MSF directory", 0, "%u streams", nstreams);
  }
  m->num_streams = nstreams;
  /* Every block of the file belongs to at most one stream (LLVM's
   * MSFBuilder and microsoft-pdb's msf.cpp allocate them from one free
   * block map), so the streams together hold at most as many blocks as the
   * file: a stream cannot be larger than the file, nor all of them.  This
   * bounds every stream copy by the input's size. */
  size_t file_blocks = len / bs;
  size_t total = 0;
  for (uint32_t i = 0; i < nstreams; i++) {
    uint32_t sz = rd_u32(&d, "MSF directory StreamSizes");
    m->sizes[i] = sz;
    m->first[i] = (uint32_t)total;
    if (sz == MSF_NIL_STREAM)
      continue;
    total += blocks_for(sz, bs);
    if (total > file_blocks) {
      free(dir);
      ps_budget_release(budget, ndir);
      msf_close(m);
      /* within NumBlocks, the file was cut short; past it, the sizes lie */
      return ps_diag_set(diag, total <= nblocks ? PS_E_TRUNCATED : PS_E_CORRUPT,
                         "MSF directory", 4 + (size_t)i * 4,
                         "stream %u of %u bytes brings the streams to %zu blocks; the "
                         "%zu-byte file has %zu blocks of %u bytes", i, sz, total, len,
                         file_blocks, bs);
    }
  }
  if (total * 4 > rd_left(&d) || total > UINT32_MAX) {
    free(dir);
    ps_budget_release(budget, ndir);
    msf_close(m);
    return ps_diag_set(diag, PS_E_CORRUPT, "MSF directory", 4 + (size_t)nstreams * 4,
                       "stream sizes need %zu block numbers, the directory holds %zu",
                       total, rd_left(&d) / 4);
  }
  m->blocks = ps_alloc_array(budget, total ? total : 1, sizeof *m->blocks, &e);
  if (!m->blocks) {
    free(dir);
    ps_budget_release(budget, ndir);
    msf_close(m);
    return ps_diag_set(diag, e, "MSF directory", 0, "%zu block numbers", total);
  }
  m->nblocks = total;
  for (size_t i = 0; i < total; i++) {
    size_t at = rd_tell(&d);
    uint32_t b = rd_u32(&d, "MSF directory StreamBlocks");
    if (!block_ok(m, b)) {
      free(dir);
      ps_budget_release(budget, ndir);
      msf_close(m);
      return ps_diag_set(diag, b < nblocks ? PS_E_TRUNCATED : PS_E_CORRUPT,
                         "MSF directory", at,
                         "stream block %u lies outside the file (%u blocks of %u bytes, "
                         "file %zu bytes)", b, nblocks, bs, len);
    }
    m->blocks[i] = b;
  }
  free(dir);
  ps_budget_release(budget, ndir);
  return PS_E_OK;
}

bool msf_has_stream(const msf_file *m, uint32_t idx) {
  return idx < m->num_streams && m->sizes[idx] != MSF_NIL_STREAM;
}

/* The part msf_stream and msf_stream_scratch share: an empty stream, or one
 * whose blocks are contiguous, is pointed at in place (returns true); else
 * false, and the caller gathers the blocks with gather_blocks. */
static bool stream_in_place(const msf_file *m, uint32_t idx, msf_stream_t *out) {
  uint32_t size = m->sizes[idx];
  uint32_t nb = blocks_for(size, m->block_size);
  const uint32_t *bl = m->blocks + m->first[idx];
  if (size == 0) {
    out->data = m->data;
    return true;
  }
  bool contiguous = true;
  for (uint32_t i = 1; i < nb && contiguous; i++)
    contiguous = bl[i] == bl[i - 1] + 1;
  if (!contiguous)
    return false;
  out->data = m->data + (size_t)bl[0] * m->block_size;
  out->len = size;
  return true;
}

static void gather_blocks(const msf_file *m, uint32_t idx, uint8_t *buf) {
  uint32_t size = m->sizes[idx];
  uint32_t bs = m->block_size;
  uint32_t nb = blocks_for(size, bs);
  const uint32_t *bl = m->blocks + m->first[idx];
  for (uint32_t i = 0; i < nb; i++) {
    size_t off = (size_t)i * bs;
    size_t take = size - off < bs ? size - off : bs;
    memcpy(buf + off, m->data + (size_t)bl[i] * bs, take);
  }
}

ps_err msf_stream(msf_file *m, uint32_t idx, msf_stream_t *out, ps_diag *diag) {
  memset(out, 0, sizeof *out);
  if (!msf_has_stream(m, idx))
    return PS_E_NOT_FOUND;
  if (stream_in_place(m, idx, out))
    return PS_E_OK;
  uint32_t size = m->sizes[idx];
  ps_err e = PS_E_OK;
  uint8_t *buf = ps_alloc_array(m->budget, size, 1, &e);
  if (!buf)
    return ps_diag_set(diag, e, "MSF stream", (size_t)-1, "stream %u of %u bytes", idx, size);
  gather_blocks(m, idx, buf);
  out->data = buf;
  out->len = size;
  out->owned = buf;
  out->owned_len = size;
  return PS_E_OK;
}

void msf_stream_free(msf_file *m, msf_stream_t *s) {
  if (s->owned) {
    free(s->owned);
    ps_budget_release(m->budget, s->owned_len);
  }
  memset(s, 0, sizeof *s);
}

ps_err msf_stream_scratch(msf_file *m, uint32_t idx, msf_stream_t *out, uint8_t **scratch,
                          size_t *scratch_cap, ps_diag *diag) {
  memset(out, 0, sizeof *out);
  if (!msf_has_stream(m, idx))
    return PS_E_NOT_FOUND;
  if (stream_in_place(m, idx, out))
    return PS_E_OK;
  uint32_t size = m->sizes[idx];
  if (*scratch_cap < size) {
    ps_err e = PS_E_OK;
    size_t ncap = *scratch_cap ? *scratch_cap : 65536;
    while (ncap < size)
      ncap *= 2;
    uint8_t *p = ps_realloc_array(m->budget, *scratch, *scratch_cap, ncap, 1, &e);
    if (!p)
      return ps_diag_set(diag, e, "MSF stream", (size_t)-1, "stream %u of %u bytes", idx, size);
    *scratch = p;
    *scratch_cap = ncap;
  }
  gather_blocks(m, idx, *scratch);
  out->data = *scratch;
  out->len = size;
  return PS_E_OK;
}

void msf_stream_ranges(const msf_file *m, uint32_t idx,
                       void (*fn)(void *arg, const uint8_t *p, size_t n), void *arg) {
  if (!fn || !msf_has_stream(m, idx))
    return;
  uint32_t size = m->sizes[idx], bs = m->block_size;
  uint32_t nb = blocks_for(size, bs);
  const uint32_t *bl = m->blocks + m->first[idx];
  for (uint32_t i = 0; i < nb;) {
    uint32_t j = i + 1;
    while (j < nb && bl[j] == bl[j - 1] + 1)
      j++;
    size_t from = (size_t)i * bs, to = (size_t)j * bs < size ? (size_t)j * bs : size;
    fn(arg, m->data + (size_t)bl[i] * bs, to - from);
    i = j;
  }
}
