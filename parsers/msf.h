/*
 * msf.h - the Multi-Stream File container of Windows PDBs (MSF 7.00).
 *
 * Layout (LLVM docs/PDB/MsfFile.rst, microsoft-pdb msf.cpp):
 *
 *   block 0: superblock  | magic[32] | BlockSize | FreeBlockMapBlock | NumBlocks |
 *                        | NumDirectoryBytes | Unknown | BlockMapAddr |
 *   block BlockMapAddr:  u32 block numbers of the stream directory
 *   directory:           NumStreams | StreamSizes[NumStreams] |
 *                        StreamBlocks[stream 0] | StreamBlocks[stream 1] | ...
 *
 * A stream is a list of blocks; msf_stream gives its bytes contiguously,
 * borrowing the file's bytes when the blocks are consecutive and copying
 * them into a buffer otherwise.  The old "Microsoft C/C++ program database
 * 2.00" (JG) format is recognised and refused with PS_E_UNSUPPORTED.
 *
 * Ownership: an msf borrows the file's bytes; its directory is allocated
 * from the budget and released by msf_close.  A stream's owned buffer is
 * released by msf_stream_free.
 */
#ifndef PDBSYM_MSF_H
#define PDBSYM_MSF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "reader.h"

#define MSF_NIL_STREAM 0xFFFFFFFFu

typedef struct {
  const uint8_t *data; /* borrowed file bytes */
  size_t len;
  uint32_t block_size;
  uint32_t num_blocks;
  uint32_t num_streams;
  uint32_t *sizes;      /* [num_streams]; MSF_NIL_STREAM for a nil stream */
  uint32_t *first;      /* [num_streams]: index into blocks of each stream's first block */
  uint32_t *blocks;     /* all stream block numbers, in directory order */
  size_t nblocks;
  ps_budget *budget;    /* borrowed */
} msf_file;

typedef struct {
  const uint8_t *data;  /* stream bytes (borrowed from the file or from owned) */
  size_t len;
  uint8_t *owned;       /* non-NULL when the blocks were copied */
  size_t owned_len;
} msf_stream_t;

bool msf_is_msf7(const uint8_t *data, size_t len);
bool msf_is_pdb2(const uint8_t *data, size_t len);

/* Validates the superblock and reads the stream directory. */
ps_err msf_open(msf_file *m, const uint8_t *data, size_t len, ps_budget *budget,
                ps_diag *diag);
void msf_close(msf_file *m);

/* true when idx names a stream that exists and is not nil */
bool msf_has_stream(const msf_file *m, uint32_t idx);
/* Gives stream idx's bytes.  A missing or nil stream is PS_E_NOT_FOUND (diag
 * untouched), so callers can treat optional streams as absent. */
ps_err msf_stream(msf_file *m, uint32_t idx, msf_stream_t *out, ps_diag *diag);
void msf_stream_free(msf_file *m, msf_stream_t *s);

/* Like msf_stream, but a non-contiguous stream is copied into *scratch
 * (grown as needed, from the budget; the caller frees it with free() and
 * releases *scratch_cap bytes), so one buffer serves many streams. */
ps_err msf_stream_scratch(msf_file *m, uint32_t idx, msf_stream_t *out, uint8_t **scratch,
                          size_t *scratch_cap, ps_diag *diag);

/* Calls fn once per run of consecutive blocks of stream idx, with the run's
 * bytes in the file (the last block cut to the stream's size); nothing for a
 * missing, nil or empty stream. */
void msf_stream_ranges(const msf_file *m, uint32_t idx,
                       void (*fn)(void *arg, const uint8_t *p, size_t n), void *arg);
#endif
