/* Memory churn with threads, fork, mremap, MAP_FIXED, MADV_DONTFORK and brk. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#define P 4096UL
static void *worker(void *arg) {
  char *m = mmap(0, 64 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memset(m, 1, 64 * P);
  mprotect(m + 8 * P, 8 * P, PROT_READ);
  munmap(m + 32 * P, 4 * P);
  for (int i = 0; i < 50; i++) { void *x = malloc(1000 + i * 3000); memset(x, 2, 100); free(x); }
  return m;
}
int main(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, worker, 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
  char *a = mmap(0, 256 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (int i = 0; i < 256; i += 2) a[i * P] = 1;
  for (int i = 0; i < 32; i++) mprotect(a + i * 8 * P, 4 * P, (i % 3) ? PROT_READ : PROT_NONE);
  char *b = mremap(a + 200 * P, 16 * P, 64 * P, MREMAP_MAYMOVE);
  mmap(a + 100 * P, 10 * P, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  madvise(a, 16 * P, MADV_DONTFORK);
  madvise(a + 40 * P, 16 * P, MADV_WIPEONFORK);
  char *s = mmap(0, 32 * P, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  s[0] = 1;
  for (int i = 0; i < 20; i++) { sbrk(3 * P); }
  sbrk(-20 * P);
  char *g = mmap(0, 8 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0);
  (void)g;
  mremap(b, 64 * P, 8 * P, 0);
  pid_t p = fork();
  if (p == 0) {
    char *c = mmap(0, 16 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    c[0] = 1;
    munmap(a + 60 * P, 30 * P);
    exit(0);
  }
  waitpid(p, 0, 0);
  mprotect(a + 180 * P, 40 * P, PROT_READ); /* runs into the moved-out hole: ENOMEM */
  return 0;
}
