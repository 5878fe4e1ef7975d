/*
 * nettrace.h - reader for .NET EventPipe traces (.nettrace), pure over bytes.
 *
 * Formats (microsoft/perfview src/TraceEvent/EventPipe/NetTraceFormat_v5.md and
 * NetTraceFormat.md):
 *
 *   NetTrace V4/V5 (what the runtime writes, "Trace" object version 4):
 *     "Nettrace" | u32 20 "!FastSerialization.1" | objects... | 0x01 (NullReference)
 *     object  = 05 05 01 i32 version i32 min_version i32 len name[len] 06  body  06
 *     body    = Trace: 48 bytes of fields
 *             | other: i32 size, zero padding to a 4-byte FILE offset, size bytes
 *     objects: Trace (first), MetadataBlock, EventBlock, StackBlock, SPBlock
 *   NetTrace V6:
 *     "Nettrace" | u32 0 | u32 major (6) | u32 minor | blocks... | EndOfStream block
 *     block   = u32 (size << 0 | kind << 24) | size bytes
 *
 * The reader is a streaming one: nt_stream_next takes a window of the file
 * that starts at the next unread byte and either hands out one whole block
 * (borrowing its bytes from the window) or says how many bytes it needs.  So a
 * caller never holds more than one block (capped by a setting) beyond what it
 * keeps itself.  Iterators then walk the events of an EventBlock, the metadata
 * rows of a MetadataBlock, the stacks of a StackBlock, the threads of a V6
 * ThreadBlock; decoders read the payloads pdbsym needs (ClrEtwAll.man layouts):
 * MethodLoadVerbose / MethodDCStopVerbose, MethodILToNativeMap (and its rundown
 * forms), ModuleLoad / ModuleDCStop, and the SampleProfiler's ThreadSample.
 *
 * Every failure is a ps_err with the diagnostic naming the block and the
 * absolute file offset.  No I/O, no globals, no allocation: everything returned
 * is borrowed from the caller's bytes.
 */
#ifndef PDBSYM_NETTRACE_H
#define PDBSYM_NETTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define NT_DEFAULT_MAX_BLOCK ((size_t)64 << 20) /* bytes in one block */

typedef enum {
  NT_BLOCK_NONE = -1, /* only the stream header was consumed */
  NT_BLOCK_END = 0,
  NT_BLOCK_TRACE = 1,
  NT_BLOCK_EVENT = 2,
  NT_BLOCK_METADATA = 3,
  NT_BLOCK_SP = 4,
  NT_BLOCK_STACK = 5,
  NT_BLOCK_THREAD = 6,        /* V6 */
  NT_BLOCK_REMOVE_THREAD = 7, /* V6 */
  NT_BLOCK_LABEL_LIST = 8,    /* V6 */
  NT_BLOCK_UNKNOWN = 100      /* V6 kinds a reader skips */
} nt_block_kind;

const char *nt_block_name(nt_block_kind k);

typedef struct {
  nt_block_kind kind;
  uint64_t offset;     /* absolute file offset of data[0] */
  const uint8_t *data; /* the block's body, borrowed from the window */
  size_t len;
  int object_version;  /* V4/V5: the object's version field */
} nt_block;

typedef struct {
  uint64_t offset;  /* absolute offset of the next unread byte */
  int format;       /* 0 before the header; 4 (FastSerialization, V4/V5) or 6 */
  int trace_version;/* the Trace object's version (V4/V5 files), 6 for V6 */
  bool header_done, trace_seen, ended;
  size_t max_block; /* cap on one block's size (a setting) */
  uint64_t blocks;
} nt_stream;

void nt_stream_init(nt_stream *s, size_t max_block);

/*
 * Reads the next unit from buf[0, len), which holds the file's bytes from
 * s->offset on (eof: nothing follows them).  On success sets *used (bytes to
 * drop from the window) and *out (kind NT_BLOCK_NONE after the stream header,
 * NT_BLOCK_END at the end), and returns PS_E_OK.  When the window is too short
 * and !eof, returns PS_E_TRUNCATED with *need set to the window length that
 * will let it progress (never more than max_block plus a small header) and
 * the stream unchanged.  Any other error (or truncation at eof) fills diag.
 */
ps_err nt_stream_next(nt_stream *s, const uint8_t *buf, size_t len, bool eof, size_t *used,
                      size_t *need, nt_block *out, ps_diag *diag);

/* The Trace object / TraceBlock. */
typedef struct {
  uint16_t sync_time[8]; /* year, month, day of week, day, hour, minute, second, ms */
  uint64_t sync_qpc;
  uint64_t qpc_frequency;
  uint32_t pointer_size;   /* 4 or 8 */
  uint32_t process_id;     /* V6: from the "ProcessId" key, else 0 */
  uint32_t processors;
  uint32_t sampling_rate;
} nt_trace_info;

ps_err nt_read_trace(const nt_block *b, int format, nt_trace_info *out, ps_diag *diag);

/* One event row (or, in a V4/V5 MetadataBlock, one metadata record). */
typedef struct {
  uint64_t offset;           /* absolute offset of the row */
  uint32_t metadata_id;
  uint32_t sequence;
  uint64_t thread_id;        /* V6: thread index (see the ThreadBlock) */
  uint64_t capture_thread_id;
  uint32_t processor;
  uint32_t stack_id;
  uint64_t timestamp;
  uint32_t label_list;       /* V6 */
  uint8_t activity_id[16];   /* V4/V5 */
  uint8_t related_activity_id[16];
  bool sorted;
  const uint8_t *payload;    /* borrowed */
  size_t payload_len;
} nt_event;

typedef struct {
  const uint8_t *p;
  size_t len, pos;
  uint64_t base;  /* absolute offset of p[0] */
  int format;
  bool compressed, in_metadata;
  const char *what;
  nt_event prev;
} nt_event_iter;

/* Starts walking an EventBlock (or a V4/V5 MetadataBlock). */
ps_err nt_events_begin(nt_event_iter *it, const nt_block *b, int format, ps_diag *diag);
/* *have = false at the block's end. */
ps_err nt_events_next(nt_event_iter *it, nt_event *ev, bool *have, ps_diag *diag);

/* One metadata record: what kind of event metadata_id stands for. Names are
 * converted to UTF-8 and cut to fit. */
typedef struct {
  uint32_t id;
  char provider[128];
  uint32_t event_id;
  char name[128];
  uint64_t keywords;
  uint32_t version;
  uint32_t level;
  int opcode;         /* -1 when not given */
  uint32_t fields;    /* top-level payload fields described */
} nt_metadata;

typedef struct {
  nt_event_iter ev; /* V4/V5 */
  const uint8_t *p; /* V6 */
  size_t len, pos;
  uint64_t base;
  int format;
} nt_metadata_iter;

ps_err nt_metadata_begin(nt_metadata_iter *it, const nt_block *b, int format, ps_diag *diag);
ps_err nt_metadata_next(nt_metadata_iter *it, nt_metadata *m, bool *have, ps_diag *diag);

/* StackBlock: ids first_id, first_id + 1, ...; each stack is an array of
 * pointer-size little-endian IPs, innermost first. */
typedef struct {
  const uint8_t *p;
  size_t len, pos;
  uint64_t base;
  uint32_t next_id, left;
  uint32_t pointer_size;
} nt_stack_iter;

ps_err nt_stacks_begin(nt_stack_iter *it, const nt_block *b, uint32_t pointer_size,
                       ps_diag *diag);
ps_err nt_stacks_next(nt_stack_iter *it, uint32_t *id, const uint8_t **ips, size_t *count,
                      bool *have, ps_diag *diag);
static inline uint64_t nt_stack_ip(const uint8_t *ips, size_t i, uint32_t pointer_size) {
  const uint8_t *q = ips + i * pointer_size;
  uint64_t v = 0;
  for (uint32_t k = 0; k < pointer_size; k++)
    v |= (uint64_t)q[k] << (8 * k);
  return v;
}

/* SPBlock (sequence point): stacks (and in V6 optionally threads) cached
 * before it may be dropped. The thread entries are validated. */
typedef struct {
  uint64_t timestamp;
  uint32_t flags;   /* V6: 1 flush threads, 2 flush metadata */
  uint32_t threads;
} nt_sequence_point;

ps_err nt_read_sequence_point(const nt_block *b, int format, nt_sequence_point *out,
                              ps_diag *diag);
/* Calls fn for each thread a sequence point lists: the capture thread (V6: its
 * index) and the sequence number of the last event it wrote, so that a reader
 * can count the events the runtime dropped (its buffer full).  A non-OK
 * return from fn stops the walk and is returned. */
typedef ps_err (*nt_sp_thread_fn)(void *ctx, uint64_t thread, uint32_t sequence);
ps_err nt_sequence_point_threads(const nt_block *b, int format, nt_sp_thread_fn fn, void *ctx,
                                 ps_diag *diag);

/* V6 RemoveThreadBlock: calls fn for each thread index the writer no longer
 * uses, with the sequence number of its last event (so that the events it
 * dropped before it went can be counted).  fn's non-OK return stops the walk. */
ps_err nt_removed_threads(const nt_block *b, nt_sp_thread_fn fn, void *ctx, ps_diag *diag);

/* V6 ThreadBlock rows. */
typedef struct {
  uint64_t index;
  uint64_t os_thread_id;  /* 0 when not given */
  uint64_t os_process_id;
  bool has_thread_id;
} nt_thread;

typedef struct {
  const uint8_t *p;
  size_t len, pos;
  uint64_t base;
} nt_thread_iter;

ps_err nt_threads_begin(nt_thread_iter *it, const nt_block *b, ps_diag *diag);
ps_err nt_threads_next(nt_thread_iter *it, nt_thread *t, bool *have, ps_diag *diag);

/* ---- payloads (dotnet/runtime ClrEtwAll.man) ---- */

/* A UTF-16LE string inside a payload, without its NUL. */
typedef struct {
  const uint8_t *p;
  size_t units;
} nt_u16;

/* UTF-8 of s into dst (NUL-terminated, cut at a character boundary to fit
 * cap); unpaired surrogates become U+FFFD.  Returns the bytes written. */
size_t nt_u16_to_utf8(nt_u16 s, char *dst, size_t cap);

/* The classes of events pdbsym reads. */
typedef enum {
  NT_EV_OTHER = 0,
  NT_EV_METHOD_LOAD,    /* MethodLoadVerbose, MethodDCStartVerbose, MethodDCStopVerbose */
  NT_EV_METHOD_UNLOAD,  /* MethodUnloadVerbose */
  NT_EV_IL_MAP,         /* MethodILToNativeMap and its DCStart/DCStop forms */
  NT_EV_MODULE_LOAD,    /* ModuleLoad, ModuleDCStart, ModuleDCStop */
  NT_EV_MODULE_UNLOAD,  /* ModuleUnload */
  NT_EV_SAMPLE          /* Microsoft-DotNETCore-SampleProfiler ThreadSample */
} nt_event_class;

nt_event_class nt_classify(const nt_metadata *m);

typedef struct {
  uint64_t method_id, module_id, start;
  uint32_t size, token, flags;
  nt_u16 ns, name, signature;
  uint16_t clr_instance;
  uint64_t rejit;
} nt_method_load;

ps_err nt_decode_method_load(const uint8_t *p, size_t n, uint32_t version, nt_method_load *out,
                             ps_diag *diag);

/* IL offsets may be the markers below; the arrays are as the event lists them
 * (not sorted). */
#define NT_IL_NO_MAPPING (-1)
#define NT_IL_PROLOG (-2)
#define NT_IL_EPILOG (-3)
typedef struct {
  uint64_t method_id, rejit;
  uint8_t extent;  /* 0: the hot part of the method */
  uint16_t count;
  const uint8_t *il, *native; /* count u32 LE each */
  uint16_t clr_instance;
} nt_il_map;

ps_err nt_decode_il_map(const uint8_t *p, size_t n, uint32_t version, nt_il_map *out,
                        ps_diag *diag);
static inline uint32_t nt_le32(const uint8_t *q) {
  return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
}
static inline int32_t nt_il_map_il(const nt_il_map *m, size_t i) {
  return (int32_t)nt_le32(m->il + 4 * i);
}
static inline uint32_t nt_il_map_native(const nt_il_map *m, size_t i) {
  return nt_le32(m->native + 4 * i);
}

typedef struct {
  uint64_t module_id, assembly_id;
  uint32_t flags;
  nt_u16 il_path, native_path;
  uint16_t clr_instance;
  bool has_pdb;            /* version >= 2 */
  uint8_t pdb_guid[16];    /* on-disk (mixed-endian) GUID layout */
  uint32_t pdb_age;
  nt_u16 pdb_path;
  uint8_t native_pdb_guid[16];
  uint32_t native_pdb_age;
  nt_u16 native_pdb_path;
} nt_module_load;

ps_err nt_decode_module_load(const uint8_t *p, size_t n, uint32_t version, nt_module_load *out,
                             ps_diag *diag);

/* ThreadSample: 1 = external (the thread was in native code), 2 = managed
 * code, 0 = error (dotnet/runtime src/native/eventpipe/ep-sample-profiler.h). */
ps_err nt_decode_sample(const uint8_t *p, size_t n, uint32_t *type, ps_diag *diag);

#endif
