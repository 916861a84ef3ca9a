/* A process tree for `maple trace`: threads, fork, vfork + exec of a
 * (static, if it could be built so) binary, don't-fork and wipe-on-fork
 * ranges, and a range written with no memory call after it before the
 * fork (which decides the child's merges). Each process writes its own /proc/self/maps to DIR/maps.PID as
 * its last act, with no memory call after it (raw read/write, _exit).
 *
 *   tree DIR [CHILD_BINARY]   the root
 *   tree DIR child            the exec'd child
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[1 << 20];
static char path[4096];

static void dump_and_exit(const char *dir) {
    snprintf(path, sizeof path, "%s/maps.%d", dir, (int)getpid());
    int in = open("/proc/self/maps", O_RDONLY);
    int n = 0, r;
    while (in >= 0 && (r = read(in, buf + n, sizeof buf - n)) > 0)
        n += r;
    close(in);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || write(out, buf, n) != n)
        _exit(99);
    close(out);
    _exit(0);
}

static void *thread_main(void *arg) {
    (void)arg;
    char *p = mmap(0, 16 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(p, 1, 4 * 4096);
    mprotect(p, 4096, PROT_READ);
    munmap(p + 8 * 4096, 4096);
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argv[1];
    long pg = 4096;
    if (argc > 2 && strcmp(argv[2], "child") == 0) {
        char *p = mmap(0, 8 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        p[0] = 1;
        mprotect(p + 2 * pg, pg, PROT_NONE);
        dump_and_exit(dir);
    }
    char *a = mmap(0, 16 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(a, 1, 16 * pg);
    madvise(a, pg, MADV_DONTFORK);
    madvise(a + 4 * pg, pg, MADV_WIPEONFORK);
    pthread_t t;
    pthread_create(&t, 0, thread_main, 0);
    pthread_join(t, 0);
    /* Written after its last call: only the pages tell the tracer that the
     * child inherits an anon_vma, so its neighbour below cannot merge.
     * (No-reserve keeps it from joining, and sharing, a written neighbour's
     * anon_vma.) */
    char *w = mmap(0, 8 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    munmap(w + 4 * pg, 4 * pg);
    w[0] = 1;
    pid_t c = fork();
    if (c == 0) {
        munmap(a + 8 * pg, pg);
        a[12 * pg] = 2;
        mmap(w + 4 * pg, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
             -1, 0);
        w[4 * pg] = 2;
        dump_and_exit(dir);
    }
    waitpid(c, 0, 0);
    const char *child = argc > 2 ? argv[2] : argv[0];
    pid_t v = vfork();
    if (v == 0) {
        execl(child, child, dir, "child", (char *)0);
        _exit(127);
    }
    waitpid(v, 0, 0);
    mprotect(a + 2 * pg, pg, PROT_READ);
    dump_and_exit(dir);
}
