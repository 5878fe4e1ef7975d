/*
 * dsipc.h - the .NET runtime's diagnostic IPC protocol, as bytes: messages
 * built and replies read, pure (no I/O, no allocation, no globals).  The
 * sockets, deadlines and the order of commands live in server/profile/.
 *
 * Spec: dotnet/diagnostics documentation/design-docs/ipc-protocol.md, checked
 * against the reference client (src/Microsoft.Diagnostics.NETCore.Client:
 * IpcHeader.cs, IpcAdvertise.cs, ProcessInfo.cs,
 * EventPipeSessionConfiguration.cs) and the runtime (src/native/eventpipe/
 * ds-protocol.c, ds-process-protocol.c, ds-eventpipe-protocol.c).  Where
 * they differ the runtime wins; the spec's slips we met:
 *   - ProcessInfo's "Details" struct lists the cookie last; on the wire it
 *     comes right after the pid (ProcessInfo.cs, ds-process-protocol.c).
 *   - the spec's older header drawing has a 16-byte magic and 22 bytes; the
 *     header is 20 bytes: 14 of magic, then size, set, id, reserved.
 *
 * Every message:
 *
 *   0              14      16    17    18        20
 *   +--------------+-------+-----+-----+---------+------------------+
 *   |"DOTNET_IPC_V1\0"| size | set | id  |reserved | payload          |
 *   +--------------+-------+-----+-----+---------+------------------+
 *   size = 20 + payload bytes, little-endian u16 (so a message is at most
 *   65,535 bytes).  A reply is set 0xFF: id 0x00 OK (payload per command),
 *   id 0xFF Error (payload: the HRESULT, u32).
 *
 * Payload encoding: uint = u32 LE, ulong = u64 LE, bool = u8, string = u32
 * count of UTF-16 units including the terminating NUL, then the units (or a
 * count of 0 for an empty string), array<T> = u32 count then the Ts.
 *
 * A runtime started with DOTNET_DiagnosticPorts=PATH dials the tool and sends
 * a 34-byte advertise first: "ADVR_V1\0", its instance cookie (16 bytes), its
 * pid (u64), 2 reserved bytes.
 */
#ifndef PDBSYM_DSIPC_H
#define PDBSYM_DSIPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define DS_HEADER_SIZE 20
#define DS_MAX_MESSAGE 65535
#define DS_ADVERTISE_SIZE 34

enum {
  DS_SET_DUMP = 0x01,
  DS_SET_EVENTPIPE = 0x02,
  DS_SET_PROFILER = 0x03,
  DS_SET_PROCESS = 0x04,
  DS_SET_SERVER = 0xFF
};

enum { /* EventPipe commands */
  DS_EP_STOP = 0x01,
  DS_EP_COLLECT = 0x02,  /* CollectTracing  (.NET Core 3.0) */
  DS_EP_COLLECT2 = 0x03, /* + requestRundown (.NET 5) */
  DS_EP_COLLECT3 = 0x04, /* + requestStackwalk (.NET 6) */
  DS_EP_COLLECT4 = 0x05, /* rundownKeyword instead of requestRundown (.NET 9) */
  DS_EP_COLLECT5 = 0x06  /* session type first, an event filter per provider (.NET 10) */
};

enum { /* Process commands */
  DS_PROC_INFO = 0x00,
  DS_PROC_RESUME = 0x01,
  DS_PROC_INFO2 = 0x04, /* .NET 6 */
  DS_PROC_INFO3 = 0x08  /* .NET 8 */
};

enum { DS_SERVER_OK = 0x00, DS_SERVER_ERROR = 0xFF };

/* The HRESULTs the diagnostic server answers with (ipc-protocol.md "Errors",
 * ds-types.h). */
#define DS_E_BAD_ENCODING 0x80131384u
#define DS_E_UNKNOWN_COMMAND 0x80131385u
#define DS_E_UNKNOWN_MAGIC 0x80131386u
#define DS_E_NOTSUPPORTED 0x80131515u
#define DS_E_FAIL 0x80004005u
#define DS_E_NOT_YET_AVAILABLE 0x8013135bu
#define DS_E_RUNTIME_UNINITIALIZED 0x80131371u
#define DS_E_INVALIDARG 0x80070057u
#define DS_E_INSUFFICIENT_BUFFER 0x8007007au
#define DS_E_ENVVAR_NOT_FOUND 0x800000cbu

/* The rundown keywords CollectTracing2's requestRundown=true stands for
 * (EventPipeSession.DefaultRundownKeyword): Loader, Jit, NGen, Start/End
 * enumeration, JittedMethodILToNativeMap, ThreadTransfer. */
#define DS_DEFAULT_RUNDOWN_KEYWORD 0x80020139ull

typedef struct {
  uint16_t size;   /* header + payload */
  uint8_t set, id;
  uint16_t reserved;
} ds_header;

/* Reads a header from p[0, n) (n >= 20): the magic, a size of at least 20.
 * A wrong magic or size is PS_E_CORRUPT with the field named. */
ps_err ds_header_parse(const uint8_t *p, size_t n, ds_header *h, ps_diag *d);

/* A message with an empty payload (ProcessInfo, ResumeRuntime): 20 bytes
 * into out (cap >= 20); returns the length, 0 when cap is short. */
size_t ds_build_simple(uint8_t *out, size_t cap, uint8_t set, uint8_t id);
/* StopTracing of session: 28 bytes. */
size_t ds_build_stop(uint8_t *out, size_t cap, uint64_t session);

typedef struct {
  uint64_t keywords;
  uint32_t level;    /* 0-5: LogAlways .. Verbose */
  const char *name;  /* UTF-8 */
  const char *args;  /* "key=value;..." or NULL */
} ds_provider;

typedef struct {
  uint32_t buffer_mb;        /* the runtime's buffer for this session */
  uint64_t rundown_keyword;  /* 0: no rundown when the session stops */
  bool stackwalk;            /* a stack with every event */
  const ds_provider *providers;
  size_t nproviders;
} ds_collect;

/* CollectTracing<version> (1 to 5; 1 is plain CollectTracing) asking for a
 * NetTrace stream: the whole message into out[0, cap).  Versions 1 and 2
 * cannot say "no stackwalk" (version 1 cannot say "no rundown" either), and
 * are refused (PS_E_UNSUPPORTED) when c asks for what they cannot carry.
 * PS_E_LIMIT when the message does not fit cap or 65,535 bytes. */
ps_err ds_build_collect(int version, const ds_collect *c, uint8_t *out, size_t cap, size_t *len,
                        ps_diag *d);

/* A reply's payload (p, n: the bytes after its header). */
typedef struct {
  bool ok;
  uint32_t hresult; /* when !ok */
} ds_reply;

/* Set 0xFF, id 0x00 (ok) or 0xFF (error, with a 4-byte HRESULT); any other
 * header is PS_E_CORRUPT. */
ps_err ds_reply_parse(const ds_header *h, const uint8_t *p, size_t n, ds_reply *r, ps_diag *d);
/* The session id of a Collect/Stop OK reply (8 bytes). */
ps_err ds_session_parse(const uint8_t *p, size_t n, uint64_t *session, ps_diag *d);

typedef struct {
  uint32_t version;          /* ProcessInfo3's payload version; 0 before it */
  uint64_t pid;              /* in the runtime's own pid namespace */
  uint8_t cookie[16];        /* the runtime instance's GUID, as on the wire */
  char command_line[1024];   /* UTF-8, cut to fit */
  char os[32];
  char arch[32];
  char assembly[256];        /* managed entry point (ProcessInfo2 on) */
  char clr_version[64];      /* ProcessInfo2 on */
  char rid[64];              /* ProcessInfo3 version 1 on */
} ds_process_info;

/* kind: 1 ProcessInfo, 2 ProcessInfo2, 3 ProcessInfo3. */
ps_err ds_process_info_parse(int kind, const uint8_t *p, size_t n, ds_process_info *out,
                             ps_diag *d);

typedef struct {
  uint8_t cookie[16];
  uint64_t pid;
} ds_advertise;

/* The 34-byte advertise; PS_E_CORRUPT for a wrong magic. */
ps_err ds_advertise_parse(const uint8_t *p, size_t n, ds_advertise *a, ps_diag *d);

/* "DS_IPC_E_UNKNOWN_COMMAND" etc., or NULL for an HRESULT the protocol does
 * not name; ds_hresult_text says what it means to a user. */
const char *ds_hresult_name(uint32_t hr);
const char *ds_hresult_text(uint32_t hr);

/* The cookie as a GUID string (8-4-4-4-12, lower case; out >= 37 bytes). */
void ds_cookie_format(const uint8_t cookie[16], char *out, size_t cap);

#endif
