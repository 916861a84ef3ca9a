/* mseal for `maple replay`'s tests: seals part of a mapping, then tries to
   unmap, re-protect, move and discard it (each refused with EPERM, some
   after changing what comes before the seal), and maps fixed over it. */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define P 4096
static long seal(void *a, size_t len) { return syscall(462, a, len, 0); }
int main(void) {
  char *a = mmap(0, 12 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  seal(a + 4 * P, 2 * P);
  munmap(a + 2 * P, 6 * P);              /* EPERM, leaves a cut at a + 2P */
  mprotect(a, 8 * P, PROT_READ);         /* EPERM after a..a+4P */
  mremap(a + 4 * P, 2 * P, 4 * P, MREMAP_MAYMOVE);  /* EPERM */
  char *r = mmap(0, 4 * P, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  seal(r, 4 * P);
  madvise(r, P, MADV_DONTNEED);          /* EPERM: read-only anonymous */
  madvise(r, P, MADV_RANDOM);            /* allowed */
  mmap(a + 5 * P, 2 * P, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0); /* EPERM */
  munmap(a + 8 * P, 2 * P);
  return 0;
}
