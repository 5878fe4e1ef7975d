/*
 * prof_int.h - what the profile room's files share: writing a window into
 * the output folder (outdir.c), used by the sessions (session.c).
 */
#ifndef PDBSYM_PROF_INT_H
#define PDBSYM_PROF_INT_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

/* "pdbsym-PID-YYYYMMDDTHHMMSSZ-SEQ" of a window starting at start_ns */
void prof_window_stem(int pid, uint64_t start_ns, uint64_t seq, char *out, size_t cap);

/* Writes j's window (cut) in each of formats under its stem, then prunes the
 * folder to its caps; stem_out gets the stem. */
ps_err prof_outdir_write(prof_outdir *o, trace_job *j, unsigned formats, int pid,
                         uint64_t start_ns, uint64_t end_ns, uint64_t seq, uint64_t samples,
                         uint64_t dropped, char *stem_out, size_t cap, ps_diag *d);

#endif
