/* Flags /proc/PID/maps does not show, set before a mid-run snapshot:
   MAP_NORESERVE, MADV_DONTFORK, MADV_WIPEONFORK, MADV_NOHUGEPAGE, a lock.
   The start snapshot is taken after them (this program rewrites
   PID.start.maps); what follows depends on them: merges refused or made,
   a fork that leaves the don't-fork range out. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#define P 4096UL
static void snap(const char *what) {
  const char *dir = getenv("MAPLE_SNAP_DIR");
  if (!dir) return;
  char path[512], buf[1 << 16];
  snprintf(path, sizeof path, "%s/%d.%s.maps", dir, (int)getpid(), what);
  int in = open("/proc/self/maps", O_RDONLY);
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ssize_t n;
  while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0) write(out, buf, n);
  if (in >= 0) close(in);
  if (out >= 0) close(out);
}
int main(void) {
  char *a = mmap(0, 96 * P, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  /* A reservation filled in pieces. */
  mmap(a, 32 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  mmap(a + 32 * P, 32 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  madvise(a + 8 * P, 8 * P, MADV_DONTFORK);
  madvise(a + 40 * P, 4 * P, MADV_WIPEONFORK);
  madvise(a + 48 * P, 8 * P, MADV_NOHUGEPAGE);
  mlock(a + 60 * P, 2 * P);
  snap("start");
  /* Each piece made plain again: whether it merges back with its
     neighbours depends on the flags maps does not show. */
  madvise(a + 8 * P, 8 * P, MADV_DOFORK);
  madvise(a + 40 * P, 4 * P, MADV_KEEPONFORK);
  madvise(a + 48 * P, 8 * P, MADV_HUGEPAGE);
  munlock(a + 60 * P, 2 * P);
  mprotect(a + 20 * P, 4 * P, PROT_READ);
  mprotect(a + 20 * P, 4 * P, PROT_READ | PROT_WRITE);
  madvise(a + 24 * P, 4 * P, MADV_DONTFORK);
  /* A child: the don't-fork range stays behind. */
  pid_t c = fork();
  if (c == 0) return 0;
  waitpid(c, 0, 0);
  mmap(a + 64 * P, 16 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return 0;
}
