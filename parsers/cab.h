/*
 * cab.h - Microsoft Cabinet (MS-CAB, "MSCF") extraction in memory, through
 * libmspack (MSZIP, LZX, Quantum and stored folders).
 *
 * Symbol servers store compressed files as name.pd_ / name.dl_: a cabinet
 * holding one file.  cab_open reads the headers of a cabinet held in memory;
 * cab_extract decompresses one member and hands its bytes to a sink, counting
 * them against a cap, so a member that inflates past the cap is refused
 * (PS_E_LIMIT) before it is all written.
 *
 * libmspack reads through a custom mspack_system whose "files" are
 * (bytes, length) views: every read, seek and tell is bounds-checked against
 * the buffer, nothing touches the file system, and libmspack's own
 * allocations are capped per block.  No globals; no logging
 * (libmspack's messages are dropped).
 *
 * Cabinets spanning several files are not joined: a member that continues
 * in another cabinet fails to extract (PS_E_TRUNCATED).
 *
 * Ownership: a cab_archive borrows data (which must outlive it) and is freed
 * with cab_close.  Names are borrowed from the archive.
 */
#ifndef PDBSYM_CAB_H
#define PDBSYM_CAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct cab_archive cab_archive;

/* Receives decompressed bytes in order; returns PS_E_OK to go on, anything
 * else to stop the extraction (that code is returned by cab_extract). */
typedef ps_err (*cab_sink_fn)(void *ctx, const uint8_t *data, size_t len);

/* true when data starts with the cabinet signature "MSCF". */
bool cab_is_cab(const uint8_t *data, size_t len);

/* Reads the cabinet's headers.  data is borrowed until cab_close. */
ps_err cab_open(const uint8_t *data, size_t len, cab_archive **out, ps_diag *diag);
void cab_close(cab_archive *a);

/* Members in header order (files continued from another cabinet are not listed). */
size_t cab_count(const cab_archive *a);
const char *cab_name(const cab_archive *a, size_t i); /* borrowed; as stored */
uint32_t cab_size(const cab_archive *a, size_t i);    /* declared uncompressed size */

/* Index of the member named name (ASCII case-insensitive), or of the only
 * member when the archive holds exactly one; (size_t)-1 when neither. */
size_t cab_find(const cab_archive *a, const char *name);

/* Decompresses member i into sink.  max_out caps the member's size (0: no
 * cap beyond the format's 4 GiB); a member that declares or produces more is
 * refused with PS_E_LIMIT.  On error diag says why. */
ps_err cab_extract(cab_archive *a, size_t i, uint64_t max_out, cab_sink_fn sink, void *ctx,
                   ps_diag *diag);

#endif
