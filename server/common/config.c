/*
 * config.c - the settings table of `pdbsym serve` and the three places they
 * come from (environment, config file, flags).  See config.h.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* What a setting's value may be.  Every value, from the environment, a config
 * file or a flag, goes through the one reader of its kind (set_value), which
 * refuses it with one line naming the setting, the value, where it came from
 * and what is allowed.  A new setting is validated by declaring its kind. */
typedef enum {
  CF_STR,    /* text, shorter than its buffer */
  CF_U64,    /* a count: 0, 12 (or 0x hex); within [min, max] */
  CF_SIZE,   /* bytes: 512, 64K, 8M, 2G, 1T, also 64KiB / 64kb (binary); within [min, max] */
  CF_SECS,   /* seconds: 30, 30s, 5m, 2h, 1d; within [min, max] */
  CF_MS,     /* milliseconds: 250, 250ms, 2s */
  CF_BOOL,   /* true/false, yes/no, on/off, 1/0 */
  CF_LISTEN, /* HOST:PORT or [IPv6]:PORT, the port 0 to 65535 (0: any free one) */
  CF_ENUM,   /* one of the words in `allowed` ("debug|info|warn|error") */
  CF_DIR,    /* a folder that must exist (empty: the setting's default) */
  CF_CACHE,  /* a folder made when missing; refused when a file is there */
  CF_DUR,    /* a duration kept in milliseconds: 250ms, 5s, 2m, 1h; a bare number is seconds */
} cf_type;

typedef struct {
  const char *key;
  cf_type type;
  size_t off;
  size_t cap; /* CF_STR and the folder kinds: buffer size */
  const char *def;
  const char *help;
  uint64_t min, max; /* numeric kinds; max 0: no bound but the type's */
  const char *allowed; /* CF_ENUM: the words, '|'-separated */
} cf_setting;

#define STRCAP(k) sizeof(((srv_config *)0)->k)
#define S(k, d, h) {#k, CF_STR, offsetof(srv_config, k), STRCAP(k), d, h, 0, 0, NULL}
#define U(k, d, h) {#k, CF_U64, offsetof(srv_config, k), 0, d, h, 0, 0, NULL}
#define Z(k, d, h) {#k, CF_SIZE, offsetof(srv_config, k), 0, d, h, 0, 0, NULL}
#define T(k, d, h) {#k, CF_SECS, offsetof(srv_config, k), 0, d, h, 0, CF_SECS_MAX, NULL}
#define MS(k, d, h) {#k, CF_MS, offsetof(srv_config, k), 0, d, h, 0, CF_SECS_MAX * 1000, NULL}
#define B(k, d, h) {#k, CF_BOOL, offsetof(srv_config, k), 0, d, h, 0, 0, NULL}
/* the same with bounds */
#define UR(k, d, lo, hi, h) {#k, CF_U64, offsetof(srv_config, k), 0, d, h, lo, hi, NULL}
#define ZR(k, d, lo, hi, h) {#k, CF_SIZE, offsetof(srv_config, k), 0, d, h, lo, hi, NULL}
#define TR(k, d, lo, hi, h) {#k, CF_SECS, offsetof(srv_config, k), 0, d, h, lo, hi, NULL}
#define DUR(k, d, lo, hi, h) {#k, CF_DUR, offsetof(srv_config, k), 0, d, h, lo, hi, NULL}
#define L(k, d, h) {#k, CF_LISTEN, offsetof(srv_config, k), STRCAP(k), d, h, 0, 0, NULL}
#define E(k, d, words, h) {#k, CF_ENUM, offsetof(srv_config, k), STRCAP(k), d, h, 0, 0, words}
#define D(k, d, h) {#k, CF_DIR, offsetof(srv_config, k), STRCAP(k), d, h, 0, 0, NULL}
#define C(k, d, h) {#k, CF_CACHE, offsetof(srv_config, k), STRCAP(k), d, h, 0, 0, NULL}

/* Ten years: a longer duration is a typo, and seconds times 1000 must fit a long. */
#define CF_SECS_MAX ((uint64_t)315360000)
#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)

static const cf_setting settings[] = {
    L(listen, "127.0.0.1:8765", "address and port to serve on (HOST:PORT; [::1]:PORT for IPv6)"),
    C(cache_dir, ".pdbsym-cache", "folder for the SQLite cache and downloads"),
    S(symbol_path, "", "upstream sources, _NT_SYMBOL_PATH syntax; empty: Microsoft's public symbol server"),
    Z(cache_max_bytes, "0", "byte cap of the cache database; 0: the cache's default (2 GiB)"),
    Z(mem_max_bytes, "0", "byte budget of modules kept parsed in memory; 0: default (256 MiB)"),
    Z(max_pdb_bytes, "0", "largest file accepted for download (PDB, PE, unpacked .pd_); 0: default (4 GiB); never more than download_max_share of cache_max_bytes"),
    UR(download_max_share, "25", 1, 100, "percent of cache_max_bytes one download (or unpacked .pd_) may take on disk, so that one endless or inflating body cannot fill the cache folder (1 to 100)"),
    UR(max_parallel_downloads, "4", 1, 256, "HTTP transfers at once per symbol source"),
    UR(download_workers, "4", 1, 256, "threads that read folder sources, unpack, parse and store downloads"),
    UR(download_queue, "1000", 1, 1000000, "modules being looked up at once; a module beyond waits for room until its request's timeout, then is pending"),
    U(request_downloads, "16", "of download_queue, downloads one request (a /symbolicate, v5 or /traces request) may have queued or running at once; its other modules wait for one of them until its timeout, then are pending; 0: none"),
    U(request_downloads_max, "256", "downloads one request may start in all (each at most 14 GETs a key and source): its modules past it are pending without a download; 0: no limit"),
    T(download_connect_timeout, "10", "seconds to connect to a symbol server"),
    T(download_first_byte_timeout, "30", "seconds from connecting to the first byte of the answer"),
    T(download_timeout, "120", "seconds one transfer may take, at least (see download_min_rate)"),
    Z(download_min_rate, "1M", "bytes/s: a transfer declaring N bytes may take N / download_min_rate seconds when that is longer than download_timeout"),
    Z(download_low_speed, "1K", "bytes/s under which a transfer is abandoned ..."),
    T(download_low_speed_time, "30", "... after this many seconds"),
    U(download_retries, "2", "retries of a transfer after a 5xx, 408, 429, a timeout or a reset (never a 404)"),
    MS(download_retry_base_ms, "250", "first retry's wait; doubled each time, +-25%, at most 8 s"),
    U(max_redirects, "5", "redirects followed per transfer (http and https only)"),
    U(max_decoded_ratio, "64", "a content-encoded (gzip...) body may inflate at most this many times"),
    U(download_spare_slots, "1", "transfers a source may run beyond max_parallel_downloads, for modules with none running, while its transfers are slow (none younger than download_slow_after); 0: none"),
    T(download_slow_after, "10", "seconds after which a running transfer counts as slow (download_spare_slots)"),
    U(source_fail_threshold, "3", "modules in a row whose transfers failed (404s are not failures; a module's retries count once) after which a source is left alone ..."),
    T(source_backoff, "5", "... for this many seconds, doubled per further failure ..."),
    T(source_backoff_max, "300", "... up to this many seconds"),
    B(refuse_private_redirects, "false", "refuse redirects and file.ptr URLs to loopback, link-local and private addresses, unless the source's own address is one"),
    T(negative_missing_ttl, "3600", "seconds a module no source has is remembered as missing"),
    T(negative_malformed_ttl, "86400", "seconds a complete, clean download that cannot be read is remembered as malformed"),
    T(negative_suspect_ttl, "300", "seconds an unreadable download that may not be the file (HTML page, no PDB signature, length unknown) is remembered"),
    T(negative_error_ttl, "30", "seconds a fetch error, timeout or identity mismatch is remembered; doubled per further failure ..."),
    T(negative_error_max_ttl, "3600", "... up to this many seconds"),
    U(negative_memory, "16384", "negative entries also kept in memory, so a known-missing module is answered without reading SQLite (least recently used dropped first)"),
    U(persist_queue, "16", "tables answered and waiting for the cache's one writer to store them in SQLite ..."),
    Z(persist_queue_bytes, "256M", "... and the bytes they hold in memory (one larger table alone still goes through) ..."),
    T(persist_wait, "30", "... a download whose table finds the queue full waits this many seconds for room (its requests are answered already), then the table is kept in memory only, not stored"),
    B(offline, "false", "never touch the network: answer from the cache and local folders only"),
    ZR(max_body_bytes, "8M", 1, 0, "largest request body; larger ones get 413"),
    U(max_frames, "10000", "most frames in one request; more get 400"),
    U(max_modules, "1000", "most modules in one request; more get 400"),
    Z(max_answer_bytes, "32M", "largest answer body; a request whose answer would pass it gets 400"),
    UR(max_inflight, "64", 1, 100000, "requests processed at once (health, ready, metrics excluded); more get 503"),
    Z(request_memory_max, "256M", "memory budget of the requests in flight (bodies, parsed requests, answers being built or sent); past it 503"),
    U(max_inflight_per_ip, "0", "of max_inflight, requests from one client address processed at once; more get 503; 0: only max_inflight (a sidecar's clients, or a proxy's, share one address)"),
    Z(request_memory_per_ip, "0", "of request_memory_max, what the requests of one client address may reserve together; past it 503; 0: only request_memory_max"),
    Z(request_memory_keep, "16M", "bytes of freed request buffers of 128 KiB or more kept for the next requests instead of unmapped (at most a quarter of request_memory_max; they count in it and give way to requests); 0: none"),
    UR(request_workers, "64", 1, 4096, "threads that run /symbolicate, /symbolicate/v5, /modules and /traces requests"),
    UR(http_threads, "2", 1, 256, "event-loop threads serving the connections (libmicrohttpd, epoll)"),
    Z(inline_max_bytes, "64K", "a /symbolicate body up to this size (a /symbolicate/v5 body up to a quarter of it) whose modules are all in the cache's memory is answered on the event loop, without a worker (no waiting: anything more goes to a worker); 0: never"),
    UR(max_connections, "1024", 1, 1000000, "open connections at once; past it the oldest one without a complete request is closed"),
    U(max_connections_per_ip, "0", "open connections from one address (same rule); 0: only max_connections"),
    T(read_timeout, "10", "seconds from accept (or the previous answer) to a complete request, headers and body; absolute"),
    T(write_timeout, "60", "seconds an answer may take to be sent; absolute"),
    TR(defer_accept, "10", 0, 3600, "seconds the kernel keeps a new connection that has sent nothing before handing it over (TCP_DEFER_ACCEPT; rounded up to its SYN-ACK retry times 1, 3, 7, 15, 31 s); 0: off"),
    T(connection_timeout, "15", "seconds a connection may stay silent both ways (libmicrohttpd's idle timeout)"),
    S(allowed_hosts, "", "Host names accepted besides IP addresses, localhost and the listen host (comma-separated; * any)"),
    T(default_timeout, "30", "seconds a request waits for modules when it gives no timeout"),
    T(max_timeout, "300", "largest timeout a request may ask for (seconds)"),
    T(retry_after, "2", "seconds suggested to clients in retry_after / Retry-After"),
    T(shutdown_grace, "30", "seconds SIGTERM waits for requests in flight before closing"),
    T(stop_timeout, "25", "seconds from SIGTERM to exit at most: every grace of the shutdown (shutdown_grace, the downloads', the cache writer's) is cut to what is left of it"),
    Z(max_trace_bytes, "4G", "largest POST /traces body (a .nettrace file); larger ones get 413"),
    U(max_trace_jobs, "2", "POST /traces requests processed at once; more get 503"),
    ZR(trace_feed_bytes, "1M", 4 * KiB, 64 * MiB, "bytes of a POST /traces body the event loop hands to the trace's worker at a time (two such buffers a trace); past it the connection waits for the worker; 4K to 64M"),
    Z(trace_min_rate, "4K", "bytes/s a POST /traces body must average over every trace_rate_window while it streams (else it is closed); 0: no floor"),
    TR(trace_rate_window, "60", 1, 3600, "seconds over which trace_min_rate is measured, a sliding window (1 to 3600)"),
    T(trace_max_time, "3600", "seconds a POST /traces body may take to arrive, however steadily it comes (a live session's upload); 0: no limit"),
    Z(trace_stack_budget, "32M", "bytes of interned stacks a trace job keeps in memory before spilling them to disk"),
    Z(trace_code_budget, "256M", "bytes a trace job may spend on the trace's methods, addresses and frames"),
    D(trace_spill_dir, "", "folder for trace jobs' spill files and answers; empty: $TMPDIR or /tmp"),
    S(trace_images, "/usr/share/dotnet,/usr/lib/dotnet", "folders (comma-separated) where POST /traces may read the images of a trace's modules, for the maps of their ReadyToRun code and the IL of their calls: an image by its file name in one of them, or at the path the trace names when it lies in one of them; empty: none"),
    Z(trace_image_max_bytes, "256M", "largest module image a trace job reads (its ReadyToRun maps, its IL)"),
    S(cors_origins, "*", "origins a browser page may call /symbolicate/v5 from: * (any), a comma-separated list (https://profiler.firefox.com), or empty (none)"),
    T(cors_max_age, "600", "seconds a browser may keep the answer to a CORS preflight"),
    UR(v5_max_frames, "200000", 1, 0, "most addresses in one /symbolicate/v5 request, all jobs together (one library may have them all); more get 400"),
    UR(v5_max_jobs, "1000", 1, 0, "most jobs in one /symbolicate/v5 request (the Firefox Profiler sends one per library); more get 400"),
    T(v5_timeout, "120", "seconds a /symbolicate/v5 request waits for its modules' downloads (its clients never retry)"),
    S(profile_pids, "", "pids of running .NET processes to profile, comma-separated (docs/profiling.md); HTTP requests cannot add any"),
    S(profile_command, "", "also profile every .NET process whose command name (/proc/PID/comm) matches this shell pattern (dotnet, MyApp*)"),
    S(diagnostic_port, "", "a Unix socket (created mode 0600) that runtimes started with DOTNET_DiagnosticPorts=PATH[,nosuspend] dial; each is profiled, a 'suspend' one from its first instruction"),
    S(profile_push, "", "push every window's pprof to this profile store (Grafana Pyroscope's POST /ingest, e.g. http://pyroscope:4040); empty: none"),
    S(profile_push_tenant, "", "X-Scope-OrgID header of each push (a multi-tenant Pyroscope), sent to profile_push's origin only"),
    S(profile_push_auth, "", "Authorization header value of each push (Bearer TOKEN, Basic ...), sent to profile_push's origin only"),
    S(profile_push_service, "", "the application name pushed (Pyroscope's service_name); empty: the process's command name"),
    S(profile_push_labels, "", "labels added to every pushed window: name=value[,name=value] (env=prod,region=eu)"),
    UR(profile_push_queue, "100", 1, 100000, "windows waiting to be pushed (the store down, slow); past it the oldest is dropped and counted"),
    Z(profile_push_queue_bytes, "64M", "bytes of windows waiting to be pushed; past it the oldest is dropped and counted"),
    T(profile_push_timeout, "10", "seconds one push may take; a failed one is sent again after 1 s, doubled up to 60 s"),
    T(profile_scan_interval, "5", "seconds between looks for the processes profile_pids and profile_command name (one that refused is asked again at the next look while younger than 30 s, then after 1 minute if named, 5 if matched)"),
    DUR(profile_window, "60s", 250, 3600000, "each profile covers one window of this length (250ms to 1h; 5s, 2m)"),
    S(profile_dir, ".pdbsym-profiles", "folder the windows' profiles are written into"),
    S(profile_format, "speedscope,pprof", "the files of each window: speedscope, pprof, or both"),
    U(profile_max_files, "1000", "window files kept in profile_dir (every process's together); the oldest removed first"),
    Z(profile_max_bytes, "1G", "bytes of window files kept in profile_dir; the oldest removed first"),
    UR(profile_buffer_mb, "64", 1, 4096, "MB of buffer the runtime keeps for a profiling session; events past it are dropped (and counted)"),
    Z(profile_code_budget, "64M", "bytes a session's code map (methods, IL maps) may hold; past it the map is forgotten and rebuilt from a rundown"),
    Z(profile_stack_budget, "8M", "bytes of a window's interned stacks kept in memory before spilling to a file"),
    T(profile_resolve_timeout, "5", "seconds a window's end waits for a module's symbols (a module still downloading is named in a later window)"),
    TR(profile_ipc_timeout, "10", 1, 3600, "seconds each diagnostic IPC connect, write and read may take"),
    UR(profile_collect_version, "5", 2, 5, "the newest CollectTracing command tried (2 to 5); older ones follow when a runtime does not know it"),
    UR(max_profiled_processes, "4", 1, 1024, "processes profiled at once, a thread each; more named processes wait for a free one"),
    E(log_level, "info", "debug|info|warn|error", "debug, info, warn or error (JSON lines on stderr)"),
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static void seterr(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

/* The checks other rooms own (cfg_set_check), by key. */
static struct {
  const char *key;
  cfg_check_fn fn;
} checks[4];

void cfg_set_check(const char *key, cfg_check_fn fn) {
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
    if (!checks[i].key || !strcmp(checks[i].key, key)) {
      checks[i].key = key;
      checks[i].fn = fn;
      return;
    }
}

static cfg_check_fn check_of(const char *key) {
  for (size_t i = 0; i < sizeof checks / sizeof checks[0] && checks[i].key; i++)
    if (!strcmp(checks[i].key, key))
      return checks[i].fn;
  return NULL;
}

/* A number with an optional unit: digits (or 0x hex), then a unit from units
 * (each "name=multiplier"), white space around allowed.  false on junk,
 * overflow or an unknown unit. */
typedef struct {
  const char *name;
  uint64_t mul;
} cf_unit;

static bool parse_num(const char *s, const cf_unit *units, uint64_t *out) {
  while (isspace((unsigned char)*s))
    s++;
  if (!isdigit((unsigned char)*s))
    return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno)
    return false;
  const char *u = end;
  size_t ul = strlen(u);
  while (ul && isspace((unsigned char)u[ul - 1]))
    ul--;
  uint64_t mul = 1;
  if (ul) {
    if (!units)
      return false;
    const cf_unit *hit = NULL;
    for (const cf_unit *x = units; x->name; x++)
      if (strlen(x->name) == ul && !strncasecmp(u, x->name, ul))
        hit = x;
    if (!hit)
      return false;
    mul = hit->mul;
  }
  if (mul > 1 && v > UINT64_MAX / mul)
    return false;
  *out = (uint64_t)v * mul;
  return true;
}

static const cf_unit SIZE_UNITS[] = {
    {"b", 1},          {"k", 1ull << 10},   {"kb", 1ull << 10}, {"kib", 1ull << 10},
    {"m", 1ull << 20}, {"mb", 1ull << 20},  {"mib", 1ull << 20}, {"g", 1ull << 30},
    {"gb", 1ull << 30}, {"gib", 1ull << 30}, {"t", 1ull << 40}, {"tb", 1ull << 40},
    {"tib", 1ull << 40}, {NULL, 0}};
static const cf_unit SECS_UNITS[] = {{"s", 1}, {"m", 60}, {"min", 60}, {"h", 3600}, {"d", 86400},
                                     {NULL, 0}};
static const cf_unit MS_UNITS[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"min", 60000},
                                   {NULL, 0}};

/* HOST:PORT, [V6]:PORT; the port 0 to 65535. */
static bool listen_ok(const char *v, const char **why) {
  const char *colon = NULL;
  if (*v == '[') {
    const char *close = strchr(v, ']');
    if (!close || close == v + 1 || close[1] != ':') {
      *why = "want [IPV6]:PORT";
      return false;
    }
    colon = close + 1;
  } else {
    colon = strrchr(v, ':');
    if (!colon || colon == v) {
      *why = "want HOST:PORT (127.0.0.1:8765, 0.0.0.0:8765, [::1]:8765)";
      return false;
    }
    for (const char *p = v; p < colon; p++)
      if (*p == ':' || isspace((unsigned char)*p) || iscntrl((unsigned char)*p)) {
        *why = "want HOST:PORT; an IPv6 address goes in brackets ([::1]:8765)";
        return false;
      }
  }
  const char *port = colon + 1;
  size_t n = strlen(port);
  if (!n || n > 5 || strspn(port, "0123456789") != n || atol(port) > 65535) {
    *why = "the port must be a number from 0 to 65535 (0: any free port)";
    return false;
  }
  return true;
}

/* ms in the largest unit it is a whole number of: 250ms, 5s, 2m, 1h */
static void ms_text(uint64_t ms, char *buf, size_t cap) {
  static const struct { uint64_t per; const char *unit; } u[] = {
      {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
  size_t k = 0;
  while (k < 3 && !(ms && ms % u[k].per == 0))
    k++;
  snprintf(buf, cap, "%llu%s", (unsigned long long)(ms / u[k].per), u[k].unit);
}

/* a duration setting's range, "250ms..1h" (sep ".."), or "from 250ms to 1h" */
static void dur_range(const cf_setting *s, const char *from, const char *sep, char *buf, size_t cap) {
  char lo[24], hi[24];
  ms_text(s->min, lo, sizeof lo);
  ms_text(s->max, hi, sizeof hi);
  snprintf(buf, cap, "%s%s%s%s", from, lo, sep, hi);
}

static const char *kind_text(const cf_setting *s, char *buf, size_t cap) {
  char range[96] = "";
  uint64_t dflt_max = s->type == CF_SECS ? CF_SECS_MAX : s->type == CF_MS ? CF_SECS_MAX * 1000 : 0;
  if (s->min && s->max)
    snprintf(range, sizeof range, ", from %llu to %llu", (unsigned long long)s->min,
             (unsigned long long)s->max);
  else if (s->min)
    snprintf(range, sizeof range, ", at least %llu", (unsigned long long)s->min);
  else if (s->max && s->max != dflt_max)
    snprintf(range, sizeof range, ", at most %llu", (unsigned long long)s->max);
  else if (s->max)
    snprintf(range, sizeof range, ", at most 10 years");
  switch (s->type) {
  case CF_U64: snprintf(buf, cap, "want a whole number%s", range); break;
  case CF_SIZE: snprintf(buf, cap, "want a size in bytes (512, 64K, 8M, 2G)%s", range); break;
  case CF_SECS: snprintf(buf, cap, "want a duration in whole seconds (30, 30s, 5m, 2h, 1d)%s", range); break;
  case CF_MS: snprintf(buf, cap, "want a duration in milliseconds (250, 250ms, 2s)%s", range); break;
  case CF_BOOL: snprintf(buf, cap, "want true or false (also yes/no, on/off, 1/0)"); break;
  case CF_ENUM: snprintf(buf, cap, "want one of %s", s->allowed); break;
  case CF_DUR: {
    char r[64];
    dur_range(s, "from ", " to ", r, sizeof r);
    snprintf(buf, cap, "want a duration (250ms, 5s, 2m, 1h; a bare number is seconds), %s", r);
    break;
  }
  default: snprintf(buf, cap, "want text"); break;
  }
  return buf;
}

/* Reads val into s's field, or says why not in err: one line naming the
 * setting, the value, where it came from and what is allowed. */
bool cfg_parse_duration_ms(const char *s, uint64_t *ms) {
  while (isspace((unsigned char)*s))
    s++;
  if (!isdigit((unsigned char)*s))
    return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || v > 30ull * 86400 * 1000)
    return false;
  uint64_t mul = 1000;
  if (!strcmp(end, "ms"))
    mul = 1, end += 2;
  else if (*end == 's')
    mul = 1000, end++;
  else if (*end == 'm')
    mul = 60000, end++;
  else if (*end == 'h')
    mul = 3600000, end++;
  while (isspace((unsigned char)*end))
    end++;
  if (*end || v * mul > 30ull * 86400 * 1000)
    return false;
  *ms = (uint64_t)v * mul;
  return true;
}

static bool set_value(srv_config *c, const cf_setting *s, const char *val, char *err,
                      size_t cap, const char *where) {
  char *base = (char *)c + s->off;
  char allowed[256];
  const char *why = NULL;
  switch (s->type) {
  case CF_STR:
  case CF_LISTEN:
  case CF_ENUM:
  case CF_DIR:
  case CF_CACHE: {
    size_t n = strlen(val);
    if (n >= s->cap) {
      snprintf(allowed, sizeof allowed, "want at most %zu bytes", s->cap - 1);
      why = allowed;
      break;
    }
    for (const char *p = val; *p && !why; p++)
      if (iscntrl((unsigned char)*p))
        why = "a control character (a line break?) in the value";
    if (why)
      break;
    if (s->type == CF_LISTEN && !listen_ok(val, &why))
      break;
    if (s->type == CF_ENUM) {
      const char *w = s->allowed;
      bool hit = false;
      while (*w && !hit) {
        size_t wl = strcspn(w, "|");
        hit = wl == n && !strncmp(w, val, n);
        w += wl + (w[wl] == '|');
      }
      if (!hit) {
        why = kind_text(s, allowed, sizeof allowed);
        break;
      }
    }
    struct stat st;
    if (s->type == CF_DIR && n && (stat(val, &st) != 0 || !S_ISDIR(st.st_mode))) {
      why = "want an existing folder (or empty for the default)";
      break;
    }
    if (s->type == CF_CACHE && !n) {
      why = "want a folder (made when missing)";
      break;
    }
    if (s->type == CF_CACHE && stat(val, &st) == 0 && !S_ISDIR(st.st_mode)) {
      why = "want a folder; a file of that name is there";
      break;
    }
    cfg_check_fn check = check_of(s->key);
    if (check && n && !check(val, allowed, sizeof allowed)) {
      why = allowed;
      break;
    }
    memcpy(base, val, n + 1);
    return true;
  }
  case CF_U64:
  case CF_SIZE:
  case CF_SECS:
  case CF_MS: {
    const cf_unit *units = s->type == CF_SIZE   ? SIZE_UNITS
                           : s->type == CF_SECS ? SECS_UNITS
                           : s->type == CF_MS   ? MS_UNITS
                                                : NULL;
    uint64_t v;
    if (!parse_num(val, units, &v) || v < s->min || (s->max && v > s->max)) {
      why = kind_text(s, allowed, sizeof allowed);
      break;
    }
    *(uint64_t *)(void *)base = v;
    return true;
  }
  case CF_DUR: {
    uint64_t v;
    if (!cfg_parse_duration_ms(val, &v) || v < s->min || (s->max && v > s->max)) {
      why = kind_text(s, allowed, sizeof allowed);
      break;
    }
    *(uint64_t *)(void *)base = v;
    return true;
  }
  case CF_BOOL:
    if (!strcasecmp(val, "true") || !strcmp(val, "1") || !strcasecmp(val, "yes") ||
        !strcasecmp(val, "on")) {
      *(bool *)(void *)base = true;
      return true;
    }
    if (!strcasecmp(val, "false") || !strcmp(val, "0") || !strcasecmp(val, "no") ||
        !strcasecmp(val, "off")) {
      *(bool *)(void *)base = false;
      return true;
    }
    why = kind_text(s, allowed, sizeof allowed);
    break;
  }
  seterr(err, cap, "bad setting %s = '%.200s'%s (%s): %s", s->key, val,
         strlen(val) > 200 ? "..." : "", where, why ? why : "not allowed");
  return false;
}

/* Finds a setting by key, '-' and '_' alike. */
static const cf_setting *find(const char *key, size_t len) {
  for (size_t i = 0; i < NSETTINGS; i++) {
    const char *k = settings[i].key;
    if (strlen(k) != len)
      continue;
    size_t j = 0;
    for (; j < len; j++) {
      char a = key[j] == '-' ? '_' : key[j];
      if (a != k[j])
        break;
    }
    if (j == len)
      return &settings[i];
  }
  return NULL;
}

/* Edit distance of a and b (lower-cased, '-' as '_'), at most 64 bytes each. */
static size_t distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64)
    return SIZE_MAX;
  size_t row[65];
  for (size_t j = 0; j <= lb; j++)
    row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      char x = (char)tolower((unsigned char)a[i - 1]), y = (char)tolower((unsigned char)b[j - 1]);
      x = x == '-' ? '_' : x;
      y = y == '-' ? '_' : y;
      size_t best = diag + (x != y);
      if (row[j] + 1 < best)
        best = row[j] + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      diag = row[j];
      row[j] = best;
    }
  }
  return row[lb];
}

const char *cfg_nearest(const char *key) {
  const char *best = settings[0].key;
  size_t bd = SIZE_MAX;
  for (size_t i = 0; i < NSETTINGS; i++) {
    size_t d = distance(key, settings[i].key);
    if (d < bd) {
      bd = d;
      best = settings[i].key;
    }
  }
  return best;
}

static void trim(char **s) {
  while (isspace((unsigned char)**s))
    (*s)++;
  size_t n = strlen(*s);
  while (n && isspace((unsigned char)(*s)[n - 1]))
    (*s)[--n] = '\0';
}

/* A config file's value: a double-quoted value is the text between the
 * quotes (then only a comment may follow); an unquoted value ends at a '#'
 * that follows white space (`cache_dir = cache # where` is `cache`).  false,
 * with *why, for an unclosed quote or text after the closing one. */
static bool file_value(char *val, char **out, const char **why) {
  if (*val == '"') {
    char *close = strchr(val + 1, '"');
    if (!close) {
      *why = "a value that opens a double quote must close it on the same line";
      return false;
    }
    char *rest = close + 1;
    trim(&rest);
    if (*rest && *rest != '#') {
      *why = "after a quoted value only a # comment may follow";
      return false;
    }
    *close = '\0';
    *out = val + 1;
    return true;
  }
  for (char *p = val; *p; p++)
    if (*p == '#' && p > val && isspace((unsigned char)p[-1])) {
      *p = '\0';
      break;
    }
  trim(&val);
  *out = val;
  return true;
}

static bool load_file(srv_config *c, const char *path, char *err, size_t cap) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    seterr(err, cap, "config file %s: a folder, not a file", path);
    return false;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    seterr(err, cap, "config file %s: %s", path, strerror(errno));
    return false;
  }
  char line[8192];
  int no = 0;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    no++;
    size_t ll = strlen(line);
    if (ll == sizeof line - 1 && line[ll - 1] != '\n') {
      seterr(err, cap, "config file %s: line %d: longer than %zu bytes", path, no,
             sizeof line - 2);
      ok = false;
      break;
    }
    char where[1200];
    snprintf(where, sizeof where, "config file %s line %d", path, no);
    char *p = line;
    trim(&p);
    if (!*p || *p == '#')
      continue;
    char *eq = strchr(p, '=');
    if (!eq) {
      seterr(err, cap, "config file %s: line %d: expected key = value", path, no);
      ok = false;
      break;
    }
    *eq = '\0';
    char *key = p, *raw = eq + 1, *val = NULL;
    trim(&key);
    trim(&raw);
    const cf_setting *s = find(key, strlen(key));
    if (!s) {
      seterr(err, cap, "config file %s: line %d: unknown setting '%.100s'; did you mean %s?", path,
             no, key, cfg_nearest(key));
      ok = false;
      break;
    }
    const char *why = NULL;
    if (!file_value(raw, &val, &why)) {
      seterr(err, cap, "bad setting %s = '%.200s' (%s): %s", s->key, raw, where, why);
      ok = false;
      break;
    }
    if (!set_value(c, s, val, err, cap, where))
      ok = false;
  }
  fclose(f);
  return ok;
}

/* PDBSYM_ variables that are not settings but are known: the config file's,
 * the log level's of commands that set their own default, and the test
 * suite's (tests/integration/harness.py; CMakeLists.txt sets them for every
 * test).  Any other unknown PDBSYM_ variable is a warning. */
static const char *const KNOWN_ENV[] = {"PDBSYM_CONFIG", "PDBSYM_SOURCE_DIR", "PDBSYM_BIN",
                                        "PDBSYM_BUILD_DIR", "PDBSYM_LLVM_BIN", NULL};

static void warn_unknown_env(cfg_warn_fn warn, void *ctx) {
  extern char **environ;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "PDBSYM_", 7) != 0)
      continue;
    size_t n = strcspn(*e, "=");
    bool known = !strncmp(*e, "PDBSYM_TEST_", 12);
    for (const char *const *k = KNOWN_ENV; *k && !known; k++)
      known = strlen(*k) == n && !strncmp(*e, *k, n);
    char key[80];
    size_t kl = 0;
    for (const char *p = *e + 7; p < *e + n && kl + 1 < sizeof key; p++)
      key[kl++] = (char)tolower((unsigned char)*p);
    key[kl] = '\0';
    if (known || find(key, kl))
      continue;
    char msg[400], up[80];
    const char *near = cfg_nearest(key);
    size_t i = 0;
    for (; near[i] && i + 1 < sizeof up; i++)
      up[i] = (char)toupper((unsigned char)near[i]);
    up[i] = '\0';
    snprintf(msg, sizeof msg, "%.*s is not a setting and is ignored; did you mean PDBSYM_%s?",
             (int)(n > 100 ? 100 : n), *e, up);
    warn(ctx, msg);
  }
}

static void warn_stderr(void *ctx, const char *msg) {
  fprintf(stderr, "%s: warning: %s\n", ctx ? (const char *)ctx : "pdbsym", msg);
}

int cfg_load(srv_config *c, int argc, char **argv, char *err, size_t cap) {
  return cfg_load_warn(c, argc, argv, err, cap, warn_stderr, NULL);
}

int cfg_load_warn(srv_config *c, int argc, char **argv, char *err, size_t cap, cfg_warn_fn warn,
                  void *ctx) {
  memset(c, 0, sizeof *c);
  for (size_t i = 0; i < NSETTINGS; i++)
    if (!set_value(c, &settings[i], settings[i].def, err, cap, "default"))
      return 2;
  /* environment */
  for (size_t i = 0; i < NSETTINGS; i++) {
    char name[64] = "PDBSYM_";
    size_t n = strlen(name);
    for (const char *k = settings[i].key; *k && n + 1 < sizeof name; k++)
      name[n++] = (char)toupper((unsigned char)*k);
    name[n] = '\0';
    const char *v = getenv(name);
    char where[80];
    snprintf(where, sizeof where, "environment %s", name);
    if (v && !set_value(c, &settings[i], v, err, cap, where))
      return 2;
  }
  if (warn)
    warn_unknown_env(warn, ctx);
  /* the config file: flag first, else PDBSYM_CONFIG */
  const char *file = getenv("PDBSYM_CONFIG");
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: pdbsym serve [--config FILE] [--KEY VALUE]...\n\n"
             "Serves POST /symbolicate and the routes api.md describes.\n"
             "Exit status: 0 stopped by SIGTERM or SIGINT, 1 the cache or the port cannot\n"
             "be opened, 2 a bad setting.\n\n");
      cfg_help(stdout);
      return 1;
    }
    if (!strcmp(argv[i], "--config")) {
      if (i + 1 >= argc) {
        seterr(err, cap, "--config needs a file");
        return 2;
      }
      file = argv[++i];
    } else if (!strncmp(argv[i], "--config=", 9)) {
      file = argv[i] + 9;
    }
  }
  if (file && *file) {
    if (strlen(file) >= sizeof c->config_file) {
      seterr(err, cap, "config file name too long");
      return 2;
    }
    if (!load_file(c, file, err, cap))
      return 2;
    memcpy(c->config_file, file, strlen(file) + 1);
  }
  /* flags */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--config")) {
      i++;
      continue;
    }
    if (!strncmp(a, "--config=", 9))
      continue;
    if (strncmp(a, "--", 2)) {
      seterr(err, cap, "unexpected argument '%s'", a);
      return 2;
    }
    a += 2;
    const char *eq = strchr(a, '=');
    size_t klen = eq ? (size_t)(eq - a) : strlen(a);
    const cf_setting *s = find(a, klen);
    if (!s) {
      char key[80];
      snprintf(key, sizeof key, "%.*s", (int)(klen > 79 ? 79 : klen), a);
      const char *near = cfg_nearest(key);
      char flag[80];
      size_t j = 0;
      for (; near[j] && j + 1 < sizeof flag; j++)
        flag[j] = near[j] == '_' ? '-' : near[j];
      flag[j] = '\0';
      seterr(err, cap, "unknown option '--%.*s'; did you mean --%s? (see --help)", (int)klen, a,
             flag);
      return 2;
    }
    const char *val;
    if (eq) {
      val = eq + 1;
    } else if (s->type == CF_BOOL && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))) {
      val = "true";
    } else if (i + 1 < argc) {
      val = argv[++i];
    } else {
      seterr(err, cap, "--%s needs a value", s->key);
      return 2;
    }
    char where[80];
    snprintf(where, sizeof where, "flag --%.*s", (int)klen, a);
    if (!set_value(c, s, val, err, cap, where))
      return 2;
  }
  return 0;
}

bool cfg_set(srv_config *c, const char *key, const char *val, const char *where, char *err,
             size_t cap) {
  const cf_setting *s = find(key, strlen(key));
  if (!s) {
    seterr(err, cap, "no setting %s", key);
    return false;
  }
  return set_value(c, s, val, err, cap, where);
}

/* The kind of a setting as --help shows it: "[seconds]", "[count 1..256]". */
static void kind_name(const cf_setting *s, char *buf, size_t cap) {
  static const char *const names[] = {
      [CF_STR] = "text",   [CF_U64] = "count",   [CF_SIZE] = "size",   [CF_SECS] = "seconds",
      [CF_MS] = "ms",      [CF_BOOL] = "bool",   [CF_LISTEN] = "listen", [CF_ENUM] = "word",
      [CF_DIR] = "folder", [CF_CACHE] = "cache-folder", [CF_DUR] = "duration"};
  const char *n = names[s->type];
  if (!strcmp(s->key, "symbol_path"))
    n = "symbol-path";
  else if (!strcmp(s->key, "cors_origins"))
    n = "origins";
  uint64_t dflt_max = s->type == CF_SECS ? CF_SECS_MAX : s->type == CF_MS ? CF_SECS_MAX * 1000 : 0;
  if (s->type == CF_ENUM)
    snprintf(buf, cap, "[%s %s]", n, s->allowed);
  else if (s->type == CF_DUR) { /* kept in ms, shown in the unit it divides by */
    char r[64];
    dur_range(s, "", "..", r, sizeof r);
    snprintf(buf, cap, "[%s %s]", n, r);
  } else if (s->min || (s->max && s->max != dflt_max))
    snprintf(buf, cap, "[%s %llu..%s%.0llu]", n, (unsigned long long)s->min, s->max ? "" : "",
             (unsigned long long)s->max);
  else
    snprintf(buf, cap, "[%s]", n);
}

void cfg_help(FILE *out) {
  fprintf(out, "settings (flag --KEY, environment PDBSYM_KEY, config file `key = value`):\n");
  for (size_t i = 0; i < NSETTINGS; i++) {
    char kind[96];
    kind_name(&settings[i], kind, sizeof kind);
    fprintf(out, "  %-28s default %-8s %s %s\n", settings[i].key,
            *settings[i].def ? settings[i].def : "\"\"", kind, settings[i].help);
  }
  fprintf(out, "  --config FILE (or PDBSYM_CONFIG) reads a config file; precedence:\n"
               "  defaults < environment < config file < flags.\n"
               "  Sizes take K, M, G, T (binary: 64K, 8M); durations in seconds take s, m, h, d\n"
               "  (30, 5m, 2h), download_retry_base_ms takes ms or s, profile_window ms, s, m\n"
               "  or h (a bare number is seconds).  In a config file a '#'\n"
               "  after white space starts a comment; quote a value (\"...\") to keep one.\n"
               "  A bad value stops the command with exit status 2 and one line naming it.\n");
}

void cfg_print(const srv_config *c, FILE *out) {
  for (size_t i = 0; i < NSETTINGS; i++) {
    const cf_setting *s = &settings[i];
    const char *base = (const char *)c + s->off;
    switch (s->type) {
    case CF_STR:
    case CF_LISTEN:
    case CF_ENUM:
    case CF_DIR:
    case CF_CACHE:
      fprintf(out, "%s = %s\n", s->key, base);
      break;
    case CF_DUR:
      fprintf(out, "%s = %llums\n", s->key,
              (unsigned long long)*(const uint64_t *)(const void *)base);
      break;
    case CF_U64:
    case CF_SIZE:
    case CF_SECS:
    case CF_MS:
      fprintf(out, "%s = %llu\n", s->key,
              (unsigned long long)*(const uint64_t *)(const void *)base);
      break;
    case CF_BOOL:
      fprintf(out, "%s = %s\n", s->key, *(const bool *)(const void *)base ? "true" : "false");
      break;
    }
  }
}

void cfg_dl_limits(const srv_config *c, dl_limits *out) {
  memset(out, 0, sizeof *out);
  out->connect_timeout_ms = (long)c->download_connect_timeout * 1000;
  out->first_byte_timeout_ms = (long)c->download_first_byte_timeout * 1000;
  out->transfer_timeout_ms = (long)c->download_timeout * 1000;
  out->min_rate = c->download_min_rate;
  out->low_speed_limit = (long)c->download_low_speed;
  out->low_speed_time_s = (long)c->download_low_speed_time;
  out->max_retries = c->download_retries ? (int)c->download_retries : -1;
  out->retry_base_ms = (long)c->download_retry_base_ms;
  out->max_redirects = (int)c->max_redirects;
  out->max_decoded_ratio = c->max_decoded_ratio;
  out->source_fail_threshold = (int)c->source_fail_threshold;
  out->source_backoff_ms = (long)c->source_backoff * 1000;
  out->source_backoff_max_ms = (long)c->source_backoff_max * 1000;
  out->spare_slots = c->download_spare_slots ? (int)c->download_spare_slots : -1;
  out->slow_after_ms = (long)c->download_slow_after * 1000;
  out->refuse_private = c->refuse_private_redirects;
}
