/*
 * test_conns.c - the connection table (server/conns.h) on real sockets:
 * socket pairs stand for connections (the table shuts down its end; the test
 * reads the other end, where a shutdown shows as end of file), with made-up
 * client addresses.  Checks eviction order, the per-address limit, refusal
 * when every connection is busy, the absolute read and write deadlines, and
 * the rate a body streaming in (CONN_STREAM) must keep over a sliding window
 * (not while paused) and its longest time, and an early answer (conns_answer)
 * written whole before the connection lingers and is shut down.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conns.h"
#include "test.h"

typedef struct {
  int mine, peer;
} pair;

static pair mkpair(void) {
  int sv[2];
  pair p = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
    p.mine = sv[0];
    p.peer = sv[1];
    fcntl(p.peer, F_SETFL, O_NONBLOCK);
  }
  return p;
}

/* true when the table has shut down the connection (the peer reads EOF) */
static bool shut(pair p) {
  char c;
  ssize_t n = recv(p.peer, &c, 1, 0);
  return n == 0;
}

static struct sockaddr_in addr(const char *ip) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

static conn_entry *add(conns *t, pair p, const char *ip) {
  struct sockaddr_in a = addr(ip);
  return conns_add(t, p.mine, (struct sockaddr *)&a, sizeof a);
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void closepair(pair p) {
  close(p.mine);
  close(p.peer);
}

TEST(evicts_oldest_reader_when_full) {
  conns_config cfg = {3, 0, 0, 0, 0, 0, 0};
  conns *t = conns_open(&cfg);
  CHECK(t != NULL);
  pair p[5];
  conn_entry *e[5];
  for (int i = 0; i < 5; i++)
    p[i] = mkpair();
  e[0] = add(t, p[0], "127.0.0.1");
  e[1] = add(t, p[1], "127.0.0.1");
  e[2] = add(t, p[2], "127.0.0.1");
  conns_set_phase(t, e[0], CONN_BUSY); /* answering: never evicted */
  CHECK(!shut(p[0]) && !shut(p[1]) && !shut(p[2]));
  e[3] = add(t, p[3], "127.0.0.1"); /* full: the oldest reader (1) goes */
  CHECK(!shut(p[0]));
  CHECK(shut(p[1]));
  CHECK(!shut(p[2]) && !shut(p[3]));
  /* a connection back in READ after its answer is the youngest reader */
  conns_set_phase(t, e[0], CONN_READ);
  e[4] = add(t, p[4], "127.0.0.1"); /* full again: 2 is now the oldest reader */
  CHECK(shut(p[2]));
  CHECK(!shut(p[0]) && !shut(p[3]) && !shut(p[4]));
  conns_stats st;
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.open, 3);
  CHECK_EQ_U(st.evicted, 2);
  CHECK_EQ_U(st.refused, 0);
  for (int i = 0; i < 5; i++)
    conns_remove(t, e[i]);
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.open, 0);
  conns_close(t);
  for (int i = 0; i < 5; i++)
    closepair(p[i]);
}

TEST(refuses_when_every_connection_is_busy) {
  conns_config cfg = {2, 0, 0, 0, 0, 0, 0};
  conns *t = conns_open(&cfg);
  pair a = mkpair(), b = mkpair(), c = mkpair();
  conn_entry *ea = add(t, a, "10.0.0.1"), *eb = add(t, b, "10.0.0.2");
  conns_set_phase(t, ea, CONN_BUSY);
  conns_set_phase(t, eb, CONN_WRITE);
  conn_entry *ec = add(t, c, "10.0.0.3");
  CHECK(ec != NULL);
  CHECK(shut(c));
  CHECK(!shut(a) && !shut(b));
  conns_stats st;
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.refused, 1);
  CHECK_EQ_U(st.open, 2);
  CHECK_EQ_U(st.busy, 1);
  CHECK_EQ_U(st.writing, 1);
  conns_set_phase(t, ec, CONN_READ); /* no effect on a refused one */
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.open, 2);
  conns_remove(t, ea);
  conns_remove(t, eb);
  conns_remove(t, ec);
  conns_close(t);
  closepair(a);
  closepair(b);
  closepair(c);
}

TEST(per_address_limit_takes_that_address_oldest) {
  conns_config cfg = {100, 2, 0, 0, 0, 0, 0};
  conns *t = conns_open(&cfg);
  pair x1 = mkpair(), x2 = mkpair(), y1 = mkpair(), x3 = mkpair();
  conn_entry *e1 = add(t, x1, "192.0.2.1");
  conn_entry *f1 = add(t, y1, "192.0.2.9"); /* older than x2, other address */
  conn_entry *e2 = add(t, x2, "192.0.2.1");
  conn_entry *e3 = add(t, x3, "192.0.2.1"); /* third from .1: x1 goes, not y1 */
  CHECK(shut(x1));
  CHECK(!shut(y1) && !shut(x2) && !shut(x3));
  /* IPv4 and its IPv6-mapped form are one address */
  struct sockaddr_in6 m;
  memset(&m, 0, sizeof m);
  m.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:192.0.2.1", &m.sin6_addr);
  pair x4 = mkpair();
  conn_entry *e4 = conns_add(t, x4.mine, (struct sockaddr *)&m, sizeof m);
  CHECK(shut(x2));
  CHECK(!shut(x3) && !shut(x4) && !shut(y1));
  conns_remove(t, e1);
  conns_remove(t, e2);
  conns_remove(t, e3);
  conns_remove(t, e4);
  conns_remove(t, f1);
  conns_close(t);
  closepair(x1);
  closepair(x2);
  closepair(x3);
  closepair(x4);
  closepair(y1);
}

TEST(read_deadline_is_absolute) {
  conns_config cfg = {10, 0, 300, 0, 0, 0, 0};
  conns *t = conns_open(&cfg);
  pair drip = mkpair(), busy = mkpair();
  conn_entry *ed = add(t, drip, "127.0.0.1"), *eb = add(t, busy, "127.0.0.1");
  conns_set_phase(t, eb, CONN_BUSY);
  /* the dripping client sends a byte every 50 ms: no reset */
  for (int i = 0; i < 4; i++) {
    CHECK(write(drip.peer, "x", 1) == 1);
    sleep_ms(50);
  }
  CHECK(!shut(drip));
  sleep_ms(300);
  CHECK(shut(drip));
  CHECK(!shut(busy)); /* busy connections have no read deadline */
  /* back in READ, the busy one gets a fresh deadline from now */
  conns_set_phase(t, eb, CONN_READ);
  sleep_ms(150);
  CHECK(!shut(busy));
  sleep_ms(300);
  CHECK(shut(busy));
  conns_stats st;
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.read_expired, 2);
  conns_remove(t, ed);
  conns_remove(t, eb);
  conns_close(t);
  closepair(drip);
  closepair(busy);
}

TEST(write_deadline) {
  conns_config cfg = {10, 0, 0, 200, 0, 0, 0};
  conns *t = conns_open(&cfg);
  pair w = mkpair(), r = mkpair();
  conn_entry *ew = add(t, w, "127.0.0.1"), *er = add(t, r, "127.0.0.1");
  conns_set_phase(t, ew, CONN_WRITE);
  sleep_ms(400);
  CHECK(shut(w));
  CHECK(!shut(r)); /* read_timeout 0: no read deadline */
  conns_stats st;
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.write_expired, 1);
  CHECK_EQ_U(st.writing, 0);
  conns_remove(t, ew);
  conns_remove(t, er);
  conns_close(t);
  closepair(w);
  closepair(r);
}

TEST(passes_over_a_request_not_read_yet) {
  conns_config cfg = {3, 0, 0, 0, 0, 0, 0};
  conns *t = conns_open(&cfg);
  pair p[4];
  conn_entry *e[4];
  for (int i = 0; i < 4; i++)
    p[i] = mkpair();
  for (int i = 0; i < 3; i++)
    e[i] = add(t, p[i], "127.0.0.1");
  /* the oldest has sent its request; its owner has not read it yet */
  CHECK(write(p[0].peer, "GET /health HTTP/1.1\r\n\r\n", 24) == 24);
  e[3] = add(t, p[3], "127.0.0.1");
  CHECK(!shut(p[0]));
  CHECK(shut(p[1]));
  CHECK(!shut(p[2]) && !shut(p[3]));
  for (int i = 0; i < 4; i++)
    conns_remove(t, e[i]);
  conns_close(t);
  for (int i = 0; i < 4; i++)
    closepair(p[i]);
}

TEST(stream_rate_over_a_sliding_window) {
  /* at least 1000 bytes/s over every 2 s window, at most 6 s in all */
  conns_config cfg = {2, 0, 300, 0, 1000, 2000, 20000};
  conns *t = conns_open(&cfg);
  pair s = mkpair(), r = mkpair(), n = mkpair();
  conn_entry *es = add(t, s, "127.0.0.1"), *er = add(t, r, "127.0.0.1");
  conns_set_phase(t, es, CONN_STREAM);
  conns_stats st;
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.streaming, 1);
  /* not evictable: the table is full, the reader goes */
  conn_entry *en = add(t, n, "127.0.0.1");
  CHECK(shut(r));
  CHECK(!shut(s) && !shut(n));
  /* past read_timeout: a stream has no read deadline; 1500 bytes every
   * 0.5 s is three times the rate, for 4 s (twice the window) */
  for (int i = 0; i < 8; i++) {
    conns_stream_bytes(t, es, 1500);
    sleep_ms(500);
    CHECK(!shut(s));
  }
  /* then nothing: cut within a window (and the sweeper's second) */
  sleep_ms(3200);
  CHECK(shut(s));
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.streaming, 0);
  CHECK(st.slow_expired >= 1);
  conns_remove(t, es);
  conns_remove(t, er);
  conns_remove(t, en);
  conns_close(t);
  closepair(s);
  closepair(r);
  closepair(n);
}

TEST(stream_a_little_over_the_rate_is_judged_on_a_whole_window) {
  /* 1000 bytes/s over every 2 s window; the client sends 250 bytes every
   * 200 ms (1250 bytes/s, a quarter over) for 5 s: every check must see at
   * least 2 s of its bytes, the second under way included (judged on the
   * window's whole seconds only, it saw about 1 s of them and cut it) */
  conns_config cfg = {2, 0, 300, 0, 1000, 2000, 0};
  conns *t = conns_open(&cfg);
  pair s = mkpair();
  conn_entry *es = add(t, s, "127.0.0.1");
  conns_set_phase(t, es, CONN_STREAM);
  for (int i = 0; i < 25; i++) {
    conns_stream_bytes(t, es, 250);
    sleep_ms(200);
    CHECK(!shut(s));
  }
  conns_stats st;
  conns_get_stats(t, &st);
  CHECK_EQ_U(st.slow_expired, 0);
  conns_remove(t, es);
  conns_close(t);
  closepair(s);
}

TEST(stream_paused_is_not_asked_a_rate_and_ends_at_its_longest_time) {
  conns_config cfg = {4, 0, 300, 0, 1000, 1000, 3000};
  conns *t = conns_open(&cfg);
  pair s = mkpair();
  conn_entry *es = add(t, s, "127.0.0.1");
  conns_set_phase(t, es, CONN_STREAM);
  conns_stream_pause(t, es, true); /* the server is behind, not the client */
  sleep_ms(2200);
  CHECK(!shut(s));
  conns_stream_pause(t, es, false); /* the window starts again now */
  conns_stream_bytes(t, es, 5000);
  sleep_ms(600);
  CHECK(!shut(s));
  /* steady, but past its longest time (3 s) */
  conns_stream_bytes(t, es, 5000);
  sleep_ms(500);
  conns_stream_bytes(t, es, 5000);
  sleep_ms(900);
  CHECK(shut(s));
  conns_remove(t, es);
  conns_close(t);
  closepair(s);
}

TEST(an_early_answer_is_sent_then_lingers) {
  conns_config cfg = {4, 0, 10000, 0, 0, 0, 0};
  conns *t = conns_open(&cfg);
  pair s = mkpair();
  conn_entry *es = add(t, s, "127.0.0.1");
  static const char ans[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
  CHECK(conns_answer(t, es, ans, sizeof ans - 1));
  char buf[128];
  ssize_t got = recv(s.peer, buf, sizeof buf, 0);
  CHECK_EQ_U((unsigned)got, (unsigned)(sizeof ans - 1));
  CHECK(got > 0 && !memcmp(buf, ans, sizeof ans - 1));
  CHECK(shut(s)); /* the sending side ended after it */
  /* the client may go on sending for CONNS_LINGER_MS: its end is read */
  CHECK(send(s.peer, "x", 1, MSG_NOSIGNAL) == 1);
  char c;
  CHECK(recv(s.mine, &c, 1, 0) == 1);
  sleep_ms(CONNS_LINGER_MS + 1200);
  CHECK(recv(s.mine, &c, 1, MSG_DONTWAIT) == 0); /* shut down both ways */
  conns_stats st;
  conns_get_stats(t, &st);
  CHECK_EQ_U((unsigned)st.answered_early, 1);
  CHECK(!conns_answer(t, es, ans, sizeof ans - 1)); /* once */
  conns_remove(t, es);
  conns_close(t);
  closepair(s);
}

int main(void) {
  RUN(evicts_oldest_reader_when_full);
  RUN(refuses_when_every_connection_is_busy);
  RUN(per_address_limit_takes_that_address_oldest);
  RUN(read_deadline_is_absolute);
  RUN(write_deadline);
  RUN(passes_over_a_request_not_read_yet);
  RUN(stream_rate_over_a_sliding_window);
  RUN(stream_a_little_over_the_rate_is_judged_on_a_whole_window);
  RUN(stream_paused_is_not_asked_a_rate_and_ends_at_its_longest_time);
  RUN(an_early_answer_is_sent_then_lingers);
  return test_summary();
}
