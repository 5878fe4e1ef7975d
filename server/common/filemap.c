#include "filemap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

ps_err filemap_open(filemap *fm, const char *path, uint64_t max_bytes, ps_diag *diag) {
  memset(fm, 0, sizeof *fm);
  /* O_NONBLOCK: a FIFO or a device named as a file does not block the open */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return ps_diag_set(diag, PS_E_IO, path, (size_t)-1, "%s", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return ps_diag_set(diag, PS_E_IO, path, (size_t)-1, "%s", strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return ps_diag_set(diag, PS_E_IO, path, (size_t)-1, "not a regular file");
  }
  if (max_bytes && (uint64_t)st.st_size > max_bytes) {
    close(fd);
    return ps_diag_set(diag, PS_E_LIMIT, path, (size_t)-1,
                       "file is %lld bytes, over the %llu-byte limit", (long long)st.st_size,
                       (unsigned long long)max_bytes);
  }
  if (st.st_size == 0) {
    close(fd);
    return PS_E_OK;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    return ps_diag_set(diag, PS_E_IO, path, (size_t)-1, "mmap: %s", strerror(e));
  fm->map = m;
  fm->map_len = (size_t)st.st_size;
  fm->data = m;
  fm->len = (size_t)st.st_size;
  return PS_E_OK;
}

void filemap_close(filemap *fm) {
  if (fm->map)
    munmap(fm->map, fm->map_len);
  memset(fm, 0, sizeof *fm);
}

void filemap_release(void *arg, const uint8_t *p, size_t n) {
  filemap *fm = arg;
  if (!fm || !fm->map || !p || p < (const uint8_t *)fm->map ||
      (size_t)(p - (const uint8_t *)fm->map) > fm->map_len ||
      n > fm->map_len - (size_t)(p - (const uint8_t *)fm->map))
    return;
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096u;
  uintptr_t from = ((uintptr_t)p + page - 1) / page * page; /* whole pages only */
  uintptr_t to = ((uintptr_t)p + n) / page * page;
  if (to > from)
    madvise((void *)from, to - from, MADV_DONTNEED);
}
