/*
 * test_reqmem.c - the request memory budget (server/service/reqmem.h): a
 * buffer never grows past what the budget (or its grant) can take, a refused
 * growth leaves everything as it was, grants are drawn on before the budget
 * and given back whole, a buffer handed over takes its reservation along,
 * and large blocks given back are kept (in the budget's count) for the next
 * buffer, within their bound, until a request needs the room.
 */
#include "reqmem.h"
#include "test.h"

TEST(budget_bounds_buffers) {
  rm_set_max(64 * 1024);
  uint64_t base = rm_used();
  CHECK_EQ_U(base, 0);
  rm_buf a = {0}, b = {0};
  char chunk[1000];
  memset(chunk, 'x', sizeof chunk);
  size_t n = 0;
  while (rm_buf_append(&a, chunk, sizeof chunk))
    n++;
  CHECK(a.failed && !a.over_cap);
  CHECK(rm_used() <= 64 * 1024);
  CHECK_EQ_U(rm_used(), a.size);
  CHECK_EQ_U(a.len, n * sizeof chunk);
  CHECK(n >= 32); /* a doubling buffer fits at least half the budget */
  /* nothing left for a second one */
  CHECK(!rm_buf_reserve(&b, 64 * 1024));
  rm_buf_free(&a);
  CHECK_EQ_U(rm_used(), 0);
  /* a finished buffer gives its slack back */
  CHECK(rm_buf_append(&a, chunk, 1000) && rm_buf_append(&a, chunk, 500));
  CHECK_EQ_U(rm_used(), 4096);
  rm_buf_shrink(&a);
  CHECK_EQ_U(rm_used(), 1500);
  CHECK(a.p[1499] == 'x');
  rm_buf_free(&a);
  CHECK_EQ_U(rm_used(), 0);
  CHECK(rm_refused() >= 2);
  /* a buffer's own cap */
  rm_buf c = {0};
  c.cap = 1500;
  CHECK(rm_buf_append(&c, chunk, 1000));
  CHECK(!rm_buf_append(&c, chunk, 1000));
  CHECK(c.failed && c.over_cap);
  CHECK_EQ_U(c.len, 1000);
  rm_buf_free(&c);
  CHECK_EQ_U(rm_used(), 0);
  rm_set_max(0);
}

TEST(grants) {
  rm_set_max(100000);
  rm_grant g = {0, 0, NULL, false};
  CHECK(rm_grant_add(&g, 40000));
  CHECK_EQ_U(rm_used(), 40000);
  rm_buf a = {0};
  a.grant = &g;
  CHECK(rm_buf_reserve(&a, 30000)); /* 32 KiB block, inside the grant */
  CHECK_EQ_U(rm_used(), 40000);
  CHECK_EQ_U(g.used, a.size);
  rm_buf b = {0};
  b.grant = &g;
  CHECK(rm_buf_reserve(&b, 30000)); /* passes the grant: the rest from the budget */
  CHECK_EQ_U(g.size, a.size + b.size);
  CHECK_EQ_U(rm_used(), g.size);
  rm_buf_free(&a); /* back to the grant, not the budget */
  CHECK_EQ_U(rm_used(), g.size);
  CHECK_EQ_U(g.used, b.size);
  /* the budget refuses a growth the grant cannot cover: nothing changes */
  rm_buf big = {0};
  big.grant = &g;
  uint64_t before = rm_used();
  CHECK(!rm_buf_reserve(&big, 200000));
  CHECK_EQ_U(rm_used(), before);
  CHECK_EQ_U(big.size, 0);
  /* handing b over: its reservation leaves the grant */
  size_t taken;
  char *p = rm_buf_take(&b, &taken);
  CHECK(p != NULL);
  CHECK_EQ_U(g.used, 0);
  CHECK_EQ_U(rm_used(), g.size + taken);
  rm_grant_end(&g);
  CHECK_EQ_U(rm_used(), taken);
  free(p);
  rm_release(taken);
  CHECK_EQ_U(rm_used(), 0);
  CHECK(rm_peak() <= 100000);
  rm_set_max(0);
}

/* Freed blocks of RM_KEEP_MIN bytes or more are kept for the next buffer,
 * counted in the budget, up to their bound, and give way to a request the
 * budget could not take otherwise. */
TEST(kept_blocks) {
  rm_set_max(16 << 20);
  CHECK_EQ_U(rm_keep_max(), 0); /* none unless asked */
  rm_buf a = {0};
  CHECK(rm_buf_reserve(&a, 200000));
  rm_buf_free(&a);
  CHECK_EQ_U(rm_kept(), 0);
  CHECK_EQ_U(rm_used(), 0);

  rm_keep_set_max(64 << 20); /* more than a quarter of the budget: a quarter */
  CHECK_EQ_U(rm_keep_max(), 4 << 20);
  /* a small block is never kept */
  CHECK(rm_buf_reserve(&a, 1000));
  rm_buf_free(&a);
  CHECK_EQ_U(rm_kept(), 0);
  /* a large one is, and stays in the budget's count */
  CHECK(rm_buf_reserve(&a, 200000));
  size_t size = a.size;
  CHECK(size >= RM_KEEP_MIN);
  memset(a.p, 'k', size);
  a.len = 100;
  rm_buf_shrink(&a); /* not shrunk: it comes back whole */
  CHECK_EQ_U(a.size, size);
  char *block = a.p;
  rm_buf_free(&a);
  CHECK_EQ_U(rm_kept(), size);
  CHECK_EQ_U(rm_used(), size);
  /* the next buffer that large takes it: the same block, the same count */
  rm_grant g = {0, 0, NULL, false};
  CHECK(rm_grant_add(&g, 300000));
  rm_buf b = {0};
  b.grant = &g;
  CHECK(rm_buf_reserve(&b, 150000));
  CHECK(b.p == block && b.size == size);
  CHECK_EQ_U(rm_kept(), 0);
  CHECK_EQ_U(rm_used(), g.size);
  rm_buf_free(&b);
  CHECK_EQ_U(rm_kept(), size);
  /* growing into a kept block keeps what the buffer held */
  rm_buf d = {0};
  CHECK(rm_buf_append(&d, "abc", 3));
  CHECK(rm_buf_reserve(&d, RM_KEEP_MIN));
  CHECK(d.p == block && !memcmp(d.p, "abc", 3));
  rm_buf_free(&d);
  CHECK_EQ_U(rm_kept(), size);
  /* a kept block more than four times what a buffer needs stays kept */
  rm_buf big = {0};
  CHECK(rm_buf_reserve(&big, 600000));
  size_t bsize = big.size;
  char *bblock = big.p;
  rm_buf_free(&big);
  CHECK_EQ_U(rm_kept(), size + bsize);
  rm_buf c = {0};
  CHECK(rm_buf_adopt_kept(&c, bsize / 4 - 1)); /* the smaller one fits that */
  CHECK(c.p == block);
  rm_buf c2 = {0};
  CHECK(!rm_buf_adopt_kept(&c2, bsize / 4 - 1)); /* the big one is too big for it */
  CHECK(rm_buf_adopt_kept(&c2, bsize / 4));
  CHECK(c2.p == bblock);
  rm_buf_free(&c);
  rm_buf_free(&c2);
  CHECK_EQ_U(rm_kept(), size + bsize);
  /* a block kept past the bound is freed */
  rm_buf e = {0};
  CHECK(rm_buf_reserve(&e, (4 << 20) - 1000));
  rm_buf_free(&e);
  CHECK_EQ_U(rm_kept(), size + bsize);
  /* a reservation the budget could only take without the kept blocks
   * frees them */
  rm_grant_end(&g);
  CHECK_EQ_U(rm_used(), size + bsize);
  CHECK(rm_reserve((16 << 20) - 1000));
  CHECK_EQ_U(rm_kept(), 0);
  rm_release((16 << 20) - 1000);
  CHECK_EQ_U(rm_used(), 0);
  /* handed over and freed by its new owner */
  rm_buf f = {0};
  CHECK(rm_buf_reserve(&f, 200000));
  size_t charged;
  char *p = rm_buf_take(&f, &charged);
  rm_release(charged);
  rm_block_free(p, charged);
  CHECK_EQ_U(rm_kept(), charged);
  rm_keep_set_max(0); /* frees what is kept */
  CHECK_EQ_U(rm_kept(), 0);
  CHECK_EQ_U(rm_used(), 0);
  rm_set_max(0);
}

TEST(client_share) {
  rm_set_max(100000);
  rm_set_client_max(30000);
  rm_client a = {0, 0}, b = {0, 0};
  rm_grant ga = {0, 0, &a, false}, ga2 = {0, 0, &a, false}, gb = {0, 0, &b, false};
  CHECK(rm_grant_add(&ga, 20000));
  CHECK(!rm_grant_add(&ga2, 20000)); /* the address's cap, not the budget */
  CHECK(ga2.by_client);
  CHECK_EQ_U(rm_used(), 20000);
  CHECK(rm_grant_add(&ga2, 10000));
  CHECK_EQ_U(atomic_load(&a.bytes), 30000);
  CHECK(rm_grant_add(&gb, 30000)); /* another address has its own */
  CHECK(!rm_grant_add(&gb, 30000)); /* its cap */
  rm_grant_end(&gb);
  /* a buffer's block handed over leaves the grant and the address's count */
  rm_buf buf = {0};
  buf.grant = &ga;
  CHECK(rm_buf_append(&buf, "x", 1));
  size_t size;
  char *p = rm_buf_take(&buf, &size);
  CHECK_EQ_U(atomic_load(&a.bytes), 30000 - size);
  rm_release(size);
  free(p);
  rm_grant_reach(&ga, 5000); /* no-op: it is larger */
  CHECK(rm_grant_reach(&ga2, 10000));
  CHECK(!rm_grant_reach(&ga2, 40000));
  rm_grant_end(&ga);
  rm_grant_end(&ga2);
  CHECK_EQ_U(atomic_load(&a.bytes), 0);
  CHECK_EQ_U(atomic_load(&b.bytes), 0);
  CHECK_EQ_U(rm_used(), 0);
  CHECK(rm_client_refused() >= 3);
  rm_set_client_max(0);
}

int main(void) {
  RUN(budget_bounds_buffers);
  RUN(grants);
  RUN(kept_blocks);
  RUN(client_share);
  return test_summary();
}
