/* Memory locks and the newer madvise advice, for `maple replay`'s tests:
   mlock, mlock2(MLOCK_ONFAULT), munlock, mlockall(MCL_CURRENT|MCL_FUTURE)
   with mappings and heap growth made meanwhile, munlockall; KSM's
   MADV_MERGEABLE, a guard marker, MADV_POPULATE_WRITE on shared memory
   grown by mremap. */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#define P 4096
int main(void) {
  char *a = mmap(0, 16 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  mlock(a + 2 * P, 3 * P);
  mlock2(a + 8 * P, 2 * P, MLOCK_ONFAULT);
  munlock(a + 3 * P, P);
  madvise(a + 12 * P, 2 * P, MADV_MERGEABLE);
  madvise(a + 14 * P, P, MADV_GUARD_INSTALL);
  char *s = mmap(0, 4 * P, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  char *t = mremap(s, 4 * P, 8 * P, MREMAP_MAYMOVE);
  madvise(t, 8 * P, MADV_POPULATE_WRITE); /* EFAULT past the object */
  mlockall(MCL_CURRENT | MCL_FUTURE);
  char *b = mmap(0, 4 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  sbrk(8 * P);
  munlockall();
  mmap(b + 4 * P, 2 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  mlock(a, 16 * P); /* the guard page cannot be faulted in: ENOMEM */
  return 0;
}
