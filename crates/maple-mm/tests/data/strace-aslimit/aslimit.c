/* A program under an address-space limit (RLIMIT_AS, `ulimit -v`), set
   by itself: maps snapshots taken by the program, before and after.
   Buffers are static: the stack cannot grow past the limit either. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static void snapshot(const char *name) {
    static char buf[65536];
    int in = open("/proc/self/maps", O_RDONLY);
    int out = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0) write(out, buf, n);
    close(in);
    close(out);
}

/* VmSize in bytes, read without allocating. */
static unsigned long vm_size(void) {
    static char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    char *v = strstr(buf, "VmSize:");
    return v ? strtoul(v + 7, NULL, 10) * 1024 : 0;
}

int main(void) {
    const long P = 4096;
    snapshot("aslimit.start.maps");
    /* 32 pages with a free 32 above them (a reservation's top half
       given back), so that mappings over their end replace nothing else. */
    char *a = mmap(NULL, 64 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(a + 32 * P, 32 * P);
    /* Room for 24 more pages. */
    struct rlimit lim = { vm_size() + 24 * P, RLIM_INFINITY };
    setrlimit(RLIMIT_AS, &lim);
    /* 32 more do not fit. */
    mmap(NULL, 32 * P, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* Over the last 8 pages of `a` and 32 past it: 32 new pages do not
       fit either, and `a` is left cut where the mapping would start. */
    mmap(a + 24 * P, 40 * P, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    /* Over its last 4 pages and 12 past it: fits (12 left). */
    mmap(a + 28 * P, 16 * P, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    /* 4 more (8 left); growing them by 16 pages does not fit, by 4 does. */
    char *b = mmap(NULL, 4 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mremap(b, 4 * P, 20 * P, MREMAP_MAYMOVE);
    mremap(b, 4 * P, 8 * P, MREMAP_MAYMOVE);
    /* Nor does the heap grow past it. */
    void *end = sbrk(0);
    brk((char *)end + 64 * P);
    snapshot("aslimit.end.maps");
    return 0;
}
