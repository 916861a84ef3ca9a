/* A memory call that sleeps until another thread of the program acts:
 * one thread populates a userfaultfd range (madvise MADV_POPULATE_WRITE),
 * which waits for the handler thread; the handler maps a page of its own
 * (a memory call) before it fills the fault. A tracer that holds the
 * handler's call until the populating call returns deadlocks here.
 * Exits 0 when the range is filled, 3 where userfaultfd is refused. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PAGES 4

static long uffd;
static char *range;

static void *handler(void *arg) {
    (void)arg;
    for (int filled = 0; filled < PAGES;) {
        struct pollfd p = {.fd = (int)uffd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1) return (void *)1;
        struct uffd_msg msg;
        if (read((int)uffd, &msg, sizeof msg) != sizeof msg) continue;
        if (msg.event != UFFD_EVENT_PAGEFAULT) continue;
        /* A memory call while the populating call sleeps. */
        char *src = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        memset(src, 'x', 4096);
        struct uffdio_copy c = {
            .dst = msg.arg.pagefault.address & ~4095ull, .src = (unsigned long)src, .len = 4096};
        ioctl((int)uffd, UFFDIO_COPY, &c);
        munmap(src, 4096);
        filled++;
    }
    return 0;
}

int main(void) {
    uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (uffd < 0) return 3;
    struct uffdio_api api = {.api = UFFD_API};
    if (ioctl((int)uffd, UFFDIO_API, &api)) return 3;
    /* Registering splits a VMA by a flag /proc/PID/maps does not show:
     * the range is a VMA of its own, between two inaccessible pages. */
    char *all = mmap(0, (PAGES + 2) * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    range = all + 4096;
    mprotect(range, PAGES * 4096, PROT_READ | PROT_WRITE);
    struct uffdio_register reg = {
        .range = {.start = (unsigned long)range, .len = PAGES * 4096}, .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl((int)uffd, UFFDIO_REGISTER, &reg)) return 3;
    pthread_t t;
    pthread_create(&t, 0, handler, 0);
    if (madvise(range, PAGES * 4096, MADV_POPULATE_WRITE)) return 4;
    void *r;
    pthread_join(t, &r);
    if (r || range[0] != 'x' || range[(PAGES - 1) * 4096] != 'x') return 5;
    puts("filled");
    return 0;
}
